"""The agent's MemoryProvider (agent.ports): what Navi remembers, injected into every run.

The narrative summary is written by the model in the background (``memory.rebuild_summary``);
on a slow model that takes minutes. So that a fact the user asked Navi to remember is known in
the very next session, the facts stored since the summary was built (all of them when there is
no summary yet) follow it as a plain list, newest first, within ``RECENT_FACTS_CHARS``: nothing
waits on the rebuild, and the block stays bounded whatever the user stores.
"""
from __future__ import annotations

from memory_app import selectors
from memory_app.models import MemoryFact, MemorySummary

# ~300 tokens: the list of facts not yet in the summary never costs more than that.
RECENT_FACTS_CHARS = 1000
RECENT_HEADER = "Saved since that summary was written (newest first):"
FACTS_HEADER = "Facts saved about the user (newest first):"


def fact_line(fact: MemoryFact) -> str:
    return f"- {fact.key.replace('_', ' ')}: {fact.value.strip()}"


def recent_lines(facts: list[MemoryFact], budget: int = RECENT_FACTS_CHARS) -> list[str]:
    """Lines for ``facts`` (newest first) while they fit in ``budget`` characters; a fact too long
    for what is left is cut, never dropped silently in favour of an older one."""
    lines: list[str] = []
    used = 0
    for fact in facts:
        line = fact_line(fact)
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
        if text and summary is not None:
            if not summary.stale:
                return text
            facts = facts.filter(updated_at__gt=summary.updated_at)
        lines = recent_lines([f async for f in facts[:50]])
        if not lines:
            return text or None
        if not text:
            return FACTS_HEADER + "\n" + "\n".join(lines)
        return f"{text}\n\n{RECENT_HEADER}\n" + "\n".join(lines)
