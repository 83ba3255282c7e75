"""How a streamed turn looks in Telegram: plain text (no parse mode: a half-streamed Markdown
reply must never make Telegram refuse the edit), the answer as it grows, one compact line per
tool call and the plan's first line. Pure; ``TurnView.pages()`` splits at Telegram's limit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_MESSAGE = 4096  # Telegram's limit for a message's text (characters)
PAGE = 3900  # where a page is cut (room for a "(continued)" marker, never past the limit)
WORKING = "…"


def split_text(text: str, limit: int = PAGE) -> list[str]:
    """Cut ``text`` into pages of at most ``limit`` characters, at a line break or a space when
    there is one in the last fifth of the page."""
    pages: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", limit * 4 // 5, limit)
        if cut <= 0:
            cut = rest.rfind(" ", limit * 4 // 5, limit)
        if cut <= 0:
            cut = limit
        pages.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip("\n ")
    pages.append(rest)
    return [p for p in pages if p] or [""]


@dataclass
class TurnView:
    tools: list[str] = field(default_factory=list)  # "⚙ web_search …" → "✓ web_search" / "✗ web_search"
    plan: str = ""
    text: str = ""
    final: str | None = None
    ending: str = ""  # "⏹ Stopped." / "⚠ <error>"
    waiting: list[str] = field(default_factory=list)  # approval ids the turn waits for (the card is below)
    done: bool = False

    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "stream_delta" and not event.get("is_subagent"):
            self.text += str(event.get("delta") or "")
        elif kind == "tool_started" and not event.get("is_subagent"):
            self.tools.append(f"⚙ {event.get('tool')} …")
        elif kind == "tool_call" and not event.get("is_subagent"):
            mark = "✓" if event.get("success", True) else "✗"
            line = f"{mark} {event.get('tool')}"
            pending = f"⚙ {event.get('tool')} …"
            if pending in self.tools:
                self.tools[self.tools.index(pending)] = line
            else:
                self.tools.append(line)
        elif kind == "approval_required":
            self.waiting.append(str(event.get("approval_id")))
        elif kind == "approval_resolved":
            if str(event.get("approval_id")) in self.waiting:
                self.waiting.remove(str(event.get("approval_id")))
        elif kind == "plan_ready":
            steps = [s for s in str(event.get("plan") or "").splitlines() if s.strip()]
            self.plan = f"🗺 Plan: {steps[0].strip()[:200]}" + (f" (+{len(steps) - 1} steps)" if len(steps) > 1 else "") \
                if steps else ""
        elif kind == "stream_end":
            self.final = str(event.get("content") or "")
        elif kind == "stream_stopped":
            self.ending = "⏹ Stopped."
        elif kind == "error":
            self.ending = f"⚠ {event.get('message')}"
        elif kind == "session_sync":
            self.done = True

    def finish(self, result: Any) -> None:
        """Settle the end from the run's result (``TurnResult``), whatever the log showed."""
        if result.stopped:
            self.ending = "⏹ Stopped."
            if not self.text.strip():
                self.text = result.content or ""
        elif result.error:
            self.ending = f"⚠ {result.error}"
        elif self.final is None:
            self.final = result.content or ""
        self.done = True

    def render(self) -> str:
        head = [self.plan] if self.plan else []
        if self.tools:
            head.append(" · ".join(self.tools[-8:]) if len(self.tools) <= 8 else
                        f"({len(self.tools) - 8} earlier tools) " + " · ".join(self.tools[-8:]))
        body = self.final if self.final is not None else self.text
        parts = ["\n".join(head)] if head else []
        if body.strip():
            parts.append(body.strip())
        if self.waiting and not self.done:
            parts.append("⏸ Waiting for your approval (the card below).")
        if self.ending:
            parts.append(self.ending)
        text = "\n\n".join(parts)
        return text if text.strip() else WORKING

    def pages(self) -> list[str]:
        return split_text(self.render())
