"""The agent's MemoryProvider (agent.ports): what Navi remembers, injected into every run.

The narrative summary is written by the model in the background (``memory.rebuild_summary``);
on a slow model that takes minutes. So that a fact the user asked Navi to remember is known in
the very next session, the facts stored since the summary was built (all of them when there is
no summary yet) follow it as a plain list, newest first, within ``RECENT_FACTS_CHARS``: nothing
waits on the rebuild, and the block stays bounded whatever the user stores.
"""
from __future__ import annotations

import re

from asgiref.sync import sync_to_async

from agent.context import FACTS_HEADER, LEFT_OUT_HEADER, RECENT_HEADER
from memory_app import selectors
from memory_app.models import MemoryFact, MemoryFactChange, MemorySummary
from navi_site.db_connections import reconnecting

# ~300 tokens: the list of facts not yet in the summary never costs more than that.
RECENT_FACTS_CHARS = 1000


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


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _reflects(text: str, fact: MemoryFact) -> bool:
    """The summary states the fact's value: every word of it is there ("boreas"; "dark mode")."""
    return _words(fact.value) <= _words(text)


def _restated(text: str, old: str, new: str) -> tuple[str, bool]:
    """``text`` with the old value, as a whole word or phrase, replaced by the new one (and whether it was)."""
    old = old.strip()
    if len(old) < 2 or not new.strip():
        return text, False
    pattern = re.compile(rf"(?<!\w){re.escape(old)}(?!\w)", re.IGNORECASE)
    restated, count = pattern.subn(lambda _m: new.strip(), text)
    return restated, count > 0


class DjangoMemoryProvider:
    async def summary_for(self, user_id: int) -> str | None:
        """The user's summary plus the facts it does not reflect, or None when there is nothing (fetched
        fresh on every call). Two things the model writing the summary gets wrong are mended here: a
        value changed since it was written is restated in it (the 1.5B still answered "atlas" with the
        newer "boreas" listed after it), and a fact it left out is listed after it (the 1.5B summed up
        "server name: boreas" as "operating system: Linux, name: Navi")."""
        summary, every, was = await sync_to_async(_stored)(user_id)
        text = (summary.text if summary else "").strip()
        if not text or summary is None:
            lines = recent_lines(every)
            return FACTS_HEADER + "\n" + "\n".join(lines) if lines else None
        newer = _newer(every, summary)
        for fact in newer:
            if fact.pk in was:
                text, restated = _restated(text, was[fact.pk], fact.value)
                if restated:
                    del was[fact.pk]  # the summary now says the new value: naming the old one only misleads
        left_out = [f for f in every if f not in newer and not _reflects(text, f)]
        if every and len(left_out) == len(every):
            # A summary that holds none of the facts is not theirs (the 1.5B wrote a template of placeholders,
            # "server location: [specific location]", for "server name: boreas"): the facts alone are what
            # Navi knows. One that holds some is kept: it sums up at most ~200 words, in its own words.
            lines = recent_lines(every)
            return FACTS_HEADER + "\n" + "\n".join(lines) if lines else None
        blocks = [text]
        budget = RECENT_FACTS_CHARS
        for header, facts in ((RECENT_HEADER, newer), (LEFT_OUT_HEADER, left_out)):
            lines = recent_lines(facts, budget, was=was)
            if lines:
                blocks.append(header + "\n" + "\n".join(lines))
                budget -= sum(len(line) + 1 for line in lines)
        return "\n\n".join(blocks)


def _newer(every: list[MemoryFact], summary: MemorySummary) -> list[MemoryFact]:
    """The facts changed since a stale summary was written (none when it is fresh)."""
    return [f for f in every if summary.stale and f.updated_at > summary.updated_at]


@reconnecting
def _stored(user_id: int) -> tuple[MemorySummary | None, list[MemoryFact], dict[int, str]]:
    """The user's summary, their newest facts, and the value the summary still states of each fact
    changed since (by fact id). Read at the start of every turn and of every helper (subagent) in a
    thread-sensitive thread, whose connection Django and Channels check only at a request or frame
    boundary: a read that meets one PostgreSQL dropped since (a helper's, mid-turn) reads again on a new
    one, as the memory would otherwise be left out of the prompt without a word (``agent.loop._memory``)."""
    summary = MemorySummary.objects.filter(user_id=user_id).first()
    every = list(selectors.fact_list(user_id=user_id)[:50])
    was: dict[int, str] = {}
    if summary is None or not summary.text.strip():
        return summary, every, was
    # Only facts the summary saw (created before it); newest change first, so the oldest old value is kept.
    seen = [f.pk for f in _newer(every, summary) if f.created_at <= summary.updated_at]
    for change in MemoryFactChange.objects.filter(
            fact_id__in=seen, created_at__gt=summary.updated_at).order_by("-created_at"):
        was[change.fact_id] = change.old_value
    return summary, every, was
