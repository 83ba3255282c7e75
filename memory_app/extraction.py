"""Mining idle sessions for facts about their owner.

One run of ``extract_session``: claim the session (a lease on its
SessionMemoryState, so a redelivered or concurrent task does nothing), send the
messages after ``extracted_up_to_seq`` that fit the model's context, validate
the answer, then in one transaction move ``extracted_up_to_seq`` (compare-and-set
on the old value and our claim) and upsert the facts. A bad answer is retried
once; then the run is recorded as failed and no fact is touched.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import structlog
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from agent.llm.base import ChatMessage, LLMError
from memory_app import llm, prompts, selectors, services
from memory_app.models import MemoryFactChange, SessionMemoryState
from memory_app.parsing import Extraction, FactCandidate, InvalidOutput, parse_extraction
from navi_site.errors import BadRequest
from sessions_app.models import Message, Session

log = structlog.get_logger(__name__)

ATTEMPTS_PER_RUN = 2  # the first try and one retry
MAX_BATCHES_PER_RUN = 5
TRUNCATED = " …[truncated]"

Status = Literal["extracted", "nothing_new", "failed", "busy", "gone", "not_idle"]


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What one run did (printed by ``manage.py extract_memory``, logged by the task)."""

    session_id: str
    status: Status
    created: int = 0
    updated: int = 0
    forgotten: int = 0
    batches: int = 0
    up_to_seq: int = 0
    error: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.forgotten)


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    transcript: str
    last_message: Message
    up_to_seq: int  # what extracted_up_to_seq becomes once this batch is applied
    # The user messages of the transcript by their [#N]: a fact's provenance is one of them.
    user_messages: dict[int, Message]

    def source_of(self, fact: FactCandidate) -> Message | None:
        """The user message that stated ``fact``: the one the model named when that is a user message of
        this batch, else the one sharing the most words with the fact (the latest on a tie), else None.
        Never the end of the window: a wrong provenance is worse than none."""
        named = self.user_messages.get(fact.source) if fact.source is not None else None
        if named is not None:
            return named
        wanted = _words(f"{fact.value} {fact.key.replace('_', ' ')}")
        best: tuple[int, int] = (0, 0)
        found: Message | None = None
        for number, message in self.user_messages.items():
            score = (len(wanted & _words(message.content or "")), number)
            if score[0] and score > best:
                best, found = score, message
        return found


_WORD = re.compile(r"\w{3,}")


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


# -- claiming ------------------------------------------------------------------------------


def _lease() -> timedelta:
    return timedelta(seconds=llm.call_timeout() * ATTEMPTS_PER_RUN * MAX_BATCHES_PER_RUN + 60)


def claim(session_id: Any) -> str | None:
    """Take the session's extraction lease; None when another worker holds it."""
    try:
        SessionMemoryState.objects.get_or_create(session_id=session_id)
    except IntegrityError:  # created concurrently
        pass
    token = uuid.uuid4().hex
    now = timezone.now()
    taken = (
        SessionMemoryState.objects.filter(session_id=session_id)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claim_token=token, claimed_until=now + _lease())
    )
    return token if taken else None


def release(session_id: Any, token: str) -> None:
    SessionMemoryState.objects.filter(session_id=session_id, claim_token=token).update(
        claim_token="", claimed_until=None
    )


# -- the batch -----------------------------------------------------------------------------


def _line(message: Message, number: int) -> str:
    speaker = "User" if message.role == Message.Role.USER else "Assistant"
    return f"[#{number}] {speaker}: {(message.content or '').strip()}"


def build_batch(*, session_id: Any, after_seq: int, budget: int) -> Batch | None:
    """The oldest new messages that fit ``budget`` characters (newest last); None if none are new.

    A single message longer than the budget is cut. ``up_to_seq`` covers only what is sent,
    or everything up to the session's last seq when all new messages were sent.
    """
    snapshot = selectors.last_seq(session_id=session_id)
    lines: list[str] = []
    users: dict[int, Message] = {}
    used = 0
    last: Message | None = None
    complete = True
    for message in selectors.new_messages(session_id=session_id, after_seq=after_seq).filter(
        seq__lte=snapshot
    ).iterator(chunk_size=100):
        line = _line(message, len(lines) + 1)
        if used + len(line) + 2 > budget:
            if last is None:
                lines.append(line[: max(0, budget - len(TRUNCATED))] + TRUNCATED)
                last = message
                if message.role == Message.Role.USER:
                    users[1] = message
            complete = False
            break
        if message.role == Message.Role.USER:
            users[len(lines) + 1] = message
        lines.append(line)
        used += len(line) + 2
        last = message
    if last is None:
        return None
    return Batch(transcript="\n\n".join(lines), last_message=last, up_to_seq=snapshot if complete else last.seq,
                 user_messages=users)


def _known_facts(user_id: int, budget: int) -> str:
    lines: list[str] = []
    used = 0
    for fact in selectors.fact_list(user_id=user_id).iterator(chunk_size=100):
        line = f"- {fact.category}/{fact.key}: {fact.value}"
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return prompts.known_facts_block(lines)


# -- the model -----------------------------------------------------------------------------


def ask_model(target: llm.ModelTarget, user_message: str) -> Extraction:
    """Ask for facts, retrying once on an invalid answer or an error. Raises LLMError / InvalidOutput."""
    messages = [
        ChatMessage(role="system", content=prompts.EXTRACTION_SYSTEM),
        ChatMessage(role="user", content=user_message),
    ]
    error: Exception | None = None
    for attempt in range(1, ATTEMPTS_PER_RUN + 1):
        try:
            text = llm.complete(target, messages, format=prompts.EXTRACTION_SCHEMA, temperature=0.1)
            return parse_extraction(text)
        except (LLMError, InvalidOutput) as exc:
            error = exc
            log.warning("memory_extraction_attempt_failed", attempt=attempt, model=target.model, error=str(exc)[:300])
    assert error is not None
    raise error


# -- applying ------------------------------------------------------------------------------


def _apply(session: Session, token: str, old_seq: int, batch: Batch, result: Extraction, outcome: Outcome) -> bool:
    """Move the watermark (compare-and-set) and write the facts, atomically. False if we lost the claim."""
    now = timezone.now()
    with transaction.atomic():
        moved = SessionMemoryState.objects.filter(
            session_id=session.pk, claim_token=token, extracted_up_to_seq=old_seq
        ).update(extracted_up_to_seq=batch.up_to_seq, extracted_at=now, attempted_at=now, attempts=0, last_error="")
        if not moved:
            return False
        for fact in result.facts:
            source = batch.source_of(fact)
            try:
                done = services.fact_upsert(
                    user_id=session.owner_id, category=fact.category, key=fact.key, value=fact.value,
                    confidence=fact.confidence, session_id=session.pk, message_id=source.pk if source else None,
                    reason=MemoryFactChange.Reason.CONTRADICTED,
                    one_per_key=True,
                )
            except BadRequest:
                continue
            outcome.created += done.created
            outcome.updated += done.changed
        for category, key in result.forget:
            outcome.forgotten += services.fact_forget(user_id=session.owner_id, category=category, key=key) is not None
    return True


def _record_failure(session_id: Any, token: str, error: Exception) -> None:
    state = SessionMemoryState.objects.filter(session_id=session_id, claim_token=token).first()
    if state is None:
        return
    state.attempts += 1
    state.last_error = f"{type(error).__name__}: {error}"[:2000]
    state.attempted_at = timezone.now()
    state.save(update_fields=["attempts", "last_error", "attempted_at"])


def _is_idle(session: Session) -> bool:
    return session.last_active <= timezone.now() - timedelta(minutes=settings.MEMORY_IDLE_MINUTES)


def _run_batches(session: Session, token: str, outcome: Outcome) -> None:
    target = llm.target_for_profile(session.profile)
    budget = llm.input_budget_chars() - len(prompts.EXTRACTION_SYSTEM) - 200
    for _ in range(MAX_BATCHES_PER_RUN):
        old_seq = SessionMemoryState.objects.values_list("extracted_up_to_seq", flat=True).get(session_id=session.pk)
        facts_block = _known_facts(session.owner_id, max(0, budget // 4))
        batch = build_batch(session_id=session.pk, after_seq=old_seq, budget=max(200, budget - len(facts_block)))
        if batch is None:
            _skip_noise(session.pk, token, old_seq, outcome)
            return
        result = ask_model(target, prompts.extraction_user_message(facts_block, batch.transcript))
        if not _apply(session, token, old_seq, batch, result, outcome):
            outcome.status = "busy"
            return
        outcome.status, outcome.batches, outcome.up_to_seq = "extracted", outcome.batches + 1, batch.up_to_seq
        if batch.up_to_seq >= selectors.last_seq(session_id=session.pk):
            return


def _skip_noise(session_id: Any, token: str, old_seq: int, outcome: Outcome) -> None:
    """No conversation rows are new (only tool output etc.): move the watermark past them."""
    up_to = selectors.last_seq(session_id=session_id)
    SessionMemoryState.objects.filter(session_id=session_id, claim_token=token, extracted_up_to_seq=old_seq).update(
        extracted_up_to_seq=max(old_seq, up_to)
    )
    outcome.up_to_seq = max(old_seq, up_to)


def extract_session(session_id: Any, *, ignore_idle: bool = False, rebuild_summary: bool = True) -> Outcome:
    """Extract facts from the session's new messages, then rebuild the owner's summary if facts changed.

    Never raises for model trouble: the failure is recorded on the session's state (retried next run).
    """
    outcome = Outcome(session_id=str(session_id), status="nothing_new")
    session = Session.objects.select_related("profile").filter(pk=session_id).first()
    if session is None:
        outcome.status = "gone"
        return outcome
    if not ignore_idle and not _is_idle(session):
        outcome.status = "not_idle"
        return outcome
    token = claim(session.pk)
    if token is None:
        outcome.status = "busy"
        return outcome
    try:
        _run_batches(session, token, outcome)
    except (LLMError, InvalidOutput) as exc:
        _record_failure(session.pk, token, exc)
        outcome.status, outcome.error = "failed", str(exc)
        log.warning("memory_extraction_skipped", session_id=str(session.pk), error=str(exc)[:300])
    finally:
        release(session.pk, token)
    log.info("memory_extraction_done", session_id=str(session.pk), status=outcome.status, created=outcome.created,
             updated=outcome.updated, forgotten=outcome.forgotten, up_to_seq=outcome.up_to_seq)
    if outcome.changed and rebuild_summary:
        from memory_app.summary import summary_rebuild

        summary_rebuild(user_id=session.owner_id)
    return outcome
