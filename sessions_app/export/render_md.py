"""Markdown export: the conversation as a person reads it, tool calls and results included."""
from __future__ import annotations

import json
import re

from sessions_app.export.reader import ExportContext
from sessions_app.models import Message

WHO = {"user": "You", "assistant": "Navi", "tool": "Tool result", "system": "System"}
MAX_TOOL_CHARS = 20_000


def fence(text: str, lang: str = "") -> str:
    """A fenced block that the text cannot close: longer than any run of backticks in it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _when(m: Message) -> str:
    return m.created_at.strftime("%Y-%m-%d %H:%M")


def head(ctx: ExportContext) -> str:
    s = ctx.session
    lines = [f"# {s.title or 'Conversation'}", "",
             f"*Exported from Navi on {ctx.exported_at:%Y-%m-%d %H:%M} UTC · profile {s.profile_id} · "
             f"started {s.created_at:%Y-%m-%d %H:%M} UTC*", ""]
    if ctx.todo:
        lines += ["**Plan**", ""] + [f"- [{'x' if t.get('status') == 'completed' else ' '}] {t.get('title', '')}"
                                      for t in ctx.todo] + [""]
    return "\n".join(lines) + "\n"


def _message(m: Message) -> str:
    out: list[str] = []
    if m.role == "tool":
        result = m.content or ""
        if len(result) > MAX_TOOL_CHARS:
            result = result[:MAX_TOOL_CHARS] + f"\n… ({len(m.content or '') - MAX_TOOL_CHARS} more characters)"
        out += [f"**Tool result** `{m.name or 'tool'}` · {_when(m)}", "", fence(result), ""]
        return "\n".join(out) + "\n"
    label = "Plan" if m.is_plan else WHO.get(m.role, m.role)
    flags = " · (recall)" if m.is_recall else ""
    flags += " · (interrupted)" if m.interrupted else ""
    out += [f"### {label} · {_when(m)}{flags}", ""]
    if m.thinking:
        out += ["<details><summary>Reasoning</summary>", "", fence(m.thinking), "", "</details>", ""]
    if m.content:
        out += [m.content, ""]
    if m.images:
        out += [f"*({len(m.images)} image(s) attached)*", ""]
    for call in m.tool_calls or []:
        args = json.dumps(call.get("arguments") or {}, ensure_ascii=False, indent=1)
        out += [f"**Tool call** `{call.get('name', 'tool')}`", "", fence(args, "json"), ""]
    return "\n".join(out) + "\n"


def page(ctx: ExportContext, rows: list[Message], *, first: bool) -> str:
    return "".join(_message(m) for m in rows)


def tail(ctx: ExportContext, *, empty: bool) -> str:
    return "*No messages.*\n" if empty else ""
