"""The agent's MemoryProvider (agent.ports): what Navi remembers, injected into every run.

The narrative summary is written by the model in the background (``memory.rebuild_summary``);
on a slow model that takes minutes. So that a fact the user asked Navi to remember is known in
the very next session, the facts stored since the summary was built (all of them when there is
no summary yet) follow it as a plain list, newest first, within ``RECENT_FACTS_CHARS``: nothing
waits on the rebuild, and the block stays bounded whatever the user stores.
"""
from __future__ import annotations

from memory_app import selectors
from memory_app.models import MemoryFact, MemoryFactChange, MemorySummary

# ~300 tokens: the list of facts not yet in the summary never costs more than that.
RECENT_FACTS_CHARS = 1000
RECENT_HEADER = "Saved since that summary was written (newest first; where the two differ, these hold):"
FACTS_HEADER = "Facts saved about the user (newest first):"


def fact_line(fact: MemoryFact, was: str | None = None) -> str:
    line = f"- {fact.key.replace('_', ' ')}: {fact.value.strip()}"
    return f"{line} (changed from {was.strip()})" if was and was.strip() != fact.value.strip() else line


def recent_lines(facts: list[MemoryFact], budget: int = RECENT_FACTS_CHARS,
                 was: dict[int, str] | None = None) -> list[str]:
    """Lines for ``facts`` (newest first) while they fit in ``budget`` characters; a fact too long
    for what is left is cut, never dropped silently in favour of an older one. ``was``: the value
    the summary still states, by fact id, for a fact changed since."""
    lines: list[str] = []
    used = 0
    for fact in facts:
        line = fact_line(fact, (was or {}).get(fact.pk))
        room = budget - used
        if room < 40:
            break
        if len(line) > room:
            line = line[: room - 1].rstrip() + "…"
        lines.append(line)
        used += len(line) + 1
    return lines


class DjangoMemoryProvider:
    async def summary_for(self, user_id: int) -> str | None:
        """The user's summary plus the facts it does not reflect yet, or None when there is nothing
        (fetched fresh on every call)."""
        summary = await MemorySummary.objects.filter(user_id=user_id).afirst()
        text = (summary.text if summary else "").strip()
        facts = selectors.fact_list(user_id=user_id)
        was: dict[int, str] = {}
        if text and summary is not None:
            if not summary.stale:
                return text
            facts = facts.filter(updated_at__gt=summary.updated_at)
        listed = [f async for f in facts[:50]]
        if text and summary is not None:
            # A value changed since the summary was written: the summary still states the old one, and the
            # 1.5B model answered with it ("atlas") although the newer fact ("boreas") followed. The line
            # names the old value, so the two are not read as two facts. Only facts the summary saw
            # (created before it); newest change first, so the oldest change's old value is kept.
            seen = [f.pk for f in listed if f.created_at <= summary.updated_at]
            async for change in MemoryFactChange.objects.filter(
                    fact_id__in=seen, created_at__gt=summary.updated_at).order_by("-created_at"):
                was[change.fact_id] = change.old_value
        lines = recent_lines(listed, was=was)
        if not lines:
            return text or None
        if not text:
            return FACTS_HEADER + "\n" + "\n".join(lines)
        return f"{text}\n\n{RECENT_HEADER}\n" + "\n".join(lines)
