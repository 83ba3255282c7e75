"""The narrative summary of a user's facts (one LLM call; empty when there are no facts)."""
from __future__ import annotations

import structlog

from agent.llm.base import ChatMessage, LLMError
from memory_app import llm, prompts, selectors, services
from memory_app.models import MemoryFact, MemorySummary
from sessions_app.models import Session

log = structlog.get_logger(__name__)

MAX_SUMMARY_CHARS = 4000


def _target_for_user(user_id: int) -> llm.ModelTarget:
    """The model of the user's most recently active session, else the default profile's."""
    session = Session.objects.select_related("profile").filter(owner_id=user_id).order_by("-last_active").first()
    if session is not None:
        return llm.target_for_profile(session.profile)
    from profiles_app.models import AgentProfile

    profile = AgentProfile.objects.filter(pk="secretary").first() or AgentProfile.objects.order_by("id").first()
    return llm.target_for_profile(profile)


def _facts_text(facts: list[MemoryFact]) -> str:
    budget = llm.input_budget_chars() - len(prompts.SUMMARY_SYSTEM) - 100
    lines: list[str] = []
    used = 0
    for fact in facts:
        line = f"- [{fact.category}] {fact.key.replace('_', ' ')}: {fact.value}"
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return "Facts about the user:\n" + "\n".join(lines)


def summary_rebuild(*, user_id: int, force: bool = False) -> MemorySummary | None:
    """Rewrite the user's summary from their non-expired facts.

    Skipped (returns the stored summary) when the facts are those it was built from, unless
    ``force``. On a model error the old summary stays, still marked stale, and None is returned.
    """
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    facts_as_of = timezone.now()  # the summary reflects the facts as of now: later ones are listed after it
    if not get_user_model().objects.filter(pk=user_id).exists():
        return None
    facts = list(selectors.fact_list(user_id=user_id))
    version = selectors.facts_fingerprint(facts)
    current = MemorySummary.objects.filter(user_id=user_id).first()
    if current is not None and current.facts_version == version and not force:
        if current.stale:
            current.stale = False
            current.save(update_fields=["stale"])
        return current
    if not facts:
        return services.summary_set(user_id=user_id, text="", facts_version=version, facts_as_of=facts_as_of)
    messages = [
        ChatMessage(role="system", content=prompts.SUMMARY_SYSTEM),
        ChatMessage(role="user", content=_facts_text(facts)),
    ]
    try:
        text = llm.complete(_target_for_user(user_id), messages, temperature=0.3)
    except LLMError as exc:
        log.warning("memory_summary_failed", user_id=user_id, error=str(exc)[:300])
        return None
    still_stale = selectors.facts_fingerprint(list(selectors.fact_list(user_id=user_id))) != version
    summary = services.summary_set(
        user_id=user_id, text=text.strip()[:MAX_SUMMARY_CHARS], facts_version=version, still_stale=still_stale,
        facts_as_of=facts_as_of,
    )
    log.info("memory_summary_rebuilt", user_id=user_id, facts=len(facts), chars=len(summary.text))
    return summary
