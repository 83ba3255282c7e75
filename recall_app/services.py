"""Writes to recalls: schedule, cancel, skip (spec 004). Reads live in selectors.py.

Every state change publishes ``recall_update`` to the session's clients and (when a
new occurrence is due later) sends its Celery ETA task, both after commit.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import structlog
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from navi_site.errors import BadRequest, Conflict, NotFound
from recall_app import notify
from recall_app.models import Recall
from recall_app.selectors import LIVE, recall_list, recall_pending
from recall_app.timeparse import describe_delta, parse_interval, parse_when
from sessions_app.models import Session

__all__ = [
    "recall_schedule", "recall_cancel", "recall_skip", "recall_set_rules", "recall_list", "recall_pending",
    "next_occurrence", "MAX_INSTRUCTION_CHARS",
]

log = structlog.get_logger(__name__)

MAX_INSTRUCTION_CHARS = 8000
MAX_COMMENT_CHARS = 2000


def _already_pending(existing: Recall | None) -> Conflict:
    when = f" ({existing.call_type}, next at {existing.trigger_at.isoformat()})" if existing else ""
    return Conflict(
        f"This session already has a pending recall{when}. Only one pending recall per session is allowed: "
        "cancel the existing one first with manage_recall(action=\"cancel\"), then schedule the new one."
    )


def _min_interval() -> int:
    return int(getattr(settings, "RECALL_MIN_INTERVAL_SECONDS", 60))


def _trigger_at(*, call_type: str, when: str | None, timezone_offset: str | None, now: datetime,
                interval: int | None = None) -> datetime:
    if call_type == Recall.CallType.IMMEDIATE:
        return now.replace(microsecond=0)
    if not when or not str(when).strip():
        raise BadRequest(
            f"'when' is required for call_type={call_type!r}: for example '30m', '2h 15m', 'tomorrow at 09:00'."
        )
    # Whole seconds: clean ISO strings on the wire, and the occurrence key of the ETA task.
    if call_type == Recall.CallType.RECURRING and interval:
        # A recurring schedule's start that has passed (the time it was asked at, "13:00" at 13:00:40)
        # anchors the series: it begins at the first occurrence after now.
        anchor = parse_when(str(when), now=now, timezone_offset=timezone_offset, allow_past=True).replace(microsecond=0)
        return anchor if anchor > now else next_occurrence(trigger_at=anchor, interval_seconds=interval, now=now)
    return parse_when(str(when), now=now, timezone_offset=timezone_offset).replace(microsecond=0)


def _interval(*, call_type: str, interval_seconds: Any) -> int | None:
    if call_type != Recall.CallType.RECURRING:
        if interval_seconds not in (None, "", 0):
            raise BadRequest("interval_seconds is only for call_type='recurring'; leave it out for once/immediate.")
        return None
    if interval_seconds in (None, ""):
        raise BadRequest("A recurring recall needs interval_seconds (for example 300 for every 5 minutes). "
                         "For a single reminder use call_type 'once' with 'when'.")
    seconds = parse_interval(interval_seconds)
    minimum = _min_interval()
    if seconds < minimum:
        raise BadRequest(
            f"interval_seconds={seconds} is too short: a recurring recall repeats at most every {minimum} seconds."
        )
    return seconds


def _instruction(text: str | None) -> str:
    value = (text or "").strip()
    if not value:
        raise BadRequest(
            "additional_context_message is required: write the concrete todo your future self must do, naming "
            "tools, files or URLs (e.g. 'Read /tmp/build.log with filesystem; if it has errors, report the last "
            "50 lines')."
        )
    if len(value) > MAX_INSTRUCTION_CHARS:
        raise BadRequest(f"additional_context_message is too long: at most {MAX_INSTRUCTION_CHARS} characters.")
    return value


MAX_ALLOWED_TOOLS = 100
MAX_RUN_ITERATIONS = 500
MAX_RUN_SECONDS = 24 * 3600
_UNSET: Any = object()


def run_rules(*, allowed_tools: Any = _UNSET, max_iterations: Any = _UNSET, max_seconds: Any = _UNSET,
              on_approval: Any = _UNSET) -> dict[str, Any]:
    """The recall's own rules for its unattended runs, validated (only the ones given). Raises BadRequest."""
    out: dict[str, Any] = {}
    if allowed_tools is not _UNSET:
        tools = [] if allowed_tools is None else allowed_tools
        if not isinstance(tools, list) or not all(isinstance(t, str) and t.strip() and len(t) <= 200 for t in tools):
            raise BadRequest("allowed_tools must be a list of tool names, e.g. [\"web_search\", \"filesystem\"] "
                             "(empty: the profile's tools minus those that always need approval).")
        if len(tools) > MAX_ALLOWED_TOOLS:
            raise BadRequest(f"allowed_tools lists {len(tools)} tools: at most {MAX_ALLOWED_TOOLS}.")
        out["allowed_tools"] = list(dict.fromkeys(t.strip() for t in tools))
    for name, value, low, high in (("max_iterations", max_iterations, 1, MAX_RUN_ITERATIONS),
                                   ("max_seconds", max_seconds, 10, MAX_RUN_SECONDS)):
        if value is _UNSET:
            continue
        if value in (None, ""):
            out[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
            raise BadRequest(f"{name}={value!r} is not a whole number between {low} and {high} (or null for the default).")
        number = int(str(value).strip())
        if not low <= number <= high:
            raise BadRequest(f"{name}={number} is out of range: use {low} to {high} (or null for the default).")
        out[name] = number
    if on_approval is not _UNSET:
        choice = str(on_approval or "deny").strip().lower()
        if choice not in ("deny", "park"):
            raise BadRequest(f"on_approval={str(on_approval)[:40]!r} is not valid: use \"deny\" (a call that needs "
                             "approval is not run) or \"park\" (the run waits for your approval).")
        out["on_approval"] = choice
    return out


def recall_schedule(
    *,
    session: Session,
    call_type: str,
    additional_context_message: str,
    when: str | None = None,
    timezone_offset: str | None = None,
    interval_seconds: int | str | None = None,
    internal_comment: str = "",
    now: datetime | None = None,
    **rules: Any,
) -> Recall:
    """Schedule the session's recall. ``rules``: allowed_tools, max_iterations, max_seconds,
    on_approval (``run_rules``). Raises BadRequest (WhenError) for bad input and Conflict
    when the session already has a pending recall (also when a concurrent call won the race)."""
    now = now or timezone.now()
    if call_type not in Recall.CallType.values:
        raise BadRequest(f"call_type={call_type!r} is not one of: once, recurring, immediate.")
    rule_fields = run_rules(**rules)
    instruction = _instruction(additional_context_message)
    interval = _interval(call_type=call_type, interval_seconds=interval_seconds)
    trigger_at = _trigger_at(call_type=call_type, when=when, timezone_offset=timezone_offset, now=now,
                             interval=interval)
    existing = recall_pending(session=session)
    if existing is not None:
        raise _already_pending(existing)
    try:
        with transaction.atomic():
            recall = Recall.objects.create(
                session=session,
                call_type=call_type,
                trigger_at=trigger_at,
                interval_seconds=interval,
                internal_comment=(internal_comment or "").strip()[:MAX_COMMENT_CHARS],
                additional_context_message=instruction,
                **rule_fields,
            )
            notify.on_commit_publish(recall, "scheduled")
            notify.on_commit_enqueue(recall)
    except IntegrityError:
        raise _already_pending(recall_pending(session=session)) from None
    log.info("recall_scheduled", session_id=str(session.id), recall_id=str(recall.id), call_type=call_type,
             trigger_at=trigger_at.isoformat(), interval_seconds=interval)
    return recall


def recall_cancel(*, session: Session) -> Recall | None:
    """Cancel the session's pending recall (a firing one too: its run finishes, nothing follows).
    Returns the cancelled recall, or None when there was nothing to cancel."""
    with transaction.atomic():
        recall = (
            Recall.objects.select_for_update()
            .filter(session=session, status__in=[Recall.Status.PENDING, Recall.Status.FIRING])
            .order_by("trigger_at")
            .first()
        )
        if recall is None:
            return None
        recall.status = Recall.Status.CANCELLED
        recall.save(update_fields=["status", "updated_at"])
        notify.on_commit_publish(recall, "cancelled")
    log.info("recall_cancelled", session_id=str(session.id), recall_id=str(recall.id))
    return recall


def recall_set_rules(*, session: Session, **rules: Any) -> Recall:
    """Change the rules of the session's live recall (they apply from its next run). Raises
    BadRequest for bad values and NotFound when the session has no pending recall."""
    fields = run_rules(**rules)
    with transaction.atomic():
        recall = Recall.objects.select_for_update().filter(LIVE, session=session).order_by("trigger_at").first()
        if recall is None:
            raise NotFound("This session has no pending recall whose rules could be changed.")
        for name, value in fields.items():
            setattr(recall, name, value)
        recall.save(update_fields=[*fields, "updated_at"])
        notify.on_commit_publish(recall, "updated")
    log.info("recall_rules_set", session_id=str(session.id), recall_id=str(recall.id), **fields)
    return recall


def next_occurrence(*, trigger_at: datetime, interval_seconds: int, now: datetime) -> datetime:
    """The first ``trigger_at + k * interval`` (k >= 1) after ``now``: missed occurrences are skipped."""
    step = timedelta(seconds=interval_seconds)
    nxt = trigger_at + step
    if nxt <= now:
        missed = int((now - nxt) / step) + 1
        nxt += step * missed
    return nxt


def recall_skip(*, session: Session, now: datetime | None = None) -> Recall:
    """Skip the next occurrence of the session's recurring recall: trigger_at moves to
    ``max(trigger_at, now) + interval`` (never into the past). Raises BadRequest when the session
    has no recurring pending recall."""
    now = now or timezone.now()
    with transaction.atomic():
        recall = (
            Recall.objects.select_for_update()
            .filter(LIVE, session=session, call_type=Recall.CallType.RECURRING)
            .first()
        )
        if recall is None or not recall.interval_seconds:
            raise BadRequest("This session has no recurring pending recall to skip.")
        recall.trigger_at = max(recall.trigger_at, now) + timedelta(seconds=recall.interval_seconds)
        recall.save(update_fields=["trigger_at", "updated_at"])
        notify.on_commit_publish(recall, "rescheduled")
        if recall.status == Recall.Status.PENDING:  # a firing one is rescheduled when its run ends
            notify.on_commit_enqueue(recall)
    log.info("recall_skipped", session_id=str(session.id), recall_id=str(recall.id),
             trigger_at=recall.trigger_at.isoformat())
    return recall


def interval_words(seconds: int) -> str:
    """How often, in words: "1 hour", "2 hours 30 minutes"."""
    now = timezone.now()
    return describe_delta(now + timedelta(seconds=seconds), now=now)[3:]


def describe(recall: Recall, *, now: datetime | None = None) -> str:
    """One line for the model: what, when (ISO and relative), how often."""
    now = now or timezone.now()
    line = f"{recall.call_type} recall {recall.id} at {recall.trigger_at.isoformat()} "
    line += f"({describe_delta(recall.trigger_at, now=now)})"
    if recall.interval_seconds:
        line += f", every {interval_words(recall.interval_seconds)}"
    return line + f", status {recall.public_status}" + (" (running now)" if recall.status == "firing" else "")
