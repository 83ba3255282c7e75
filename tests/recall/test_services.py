"""Scheduling, cancelling, skipping: validation, the one-pending rule, events, ETA tasks."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from agent.events import event_from_dict
from navi_site.errors import BadRequest, Conflict
from recall_app import services
from recall_app.models import Recall
from tests.recall.conftest import make_recall

pytestmark = pytest.mark.django_db

GOOD = "Read /tmp/build.log with filesystem. If errors, read last 50 lines and report."


def schedule(session: Any, **kw: Any) -> Recall:
    kw.setdefault("additional_context_message", GOOD)
    kw.setdefault("call_type", "once")
    if kw["call_type"] != "immediate":
        kw.setdefault("when", "30m")
    return services.recall_schedule(session=session, **kw)


def test_schedule_once_sends_event_and_eta_task(session, sent, django_capture_on_commit_callbacks) -> None:
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        recall = schedule(session, internal_comment="  Check build logs ")
    assert recall.status == "pending" and recall.internal_comment == "Check build logs"
    assert timedelta(minutes=29) < recall.trigger_at - before <= timedelta(minutes=30)
    assert recall.trigger_at.microsecond == 0
    assert sent.tasks == [(str(recall.id), recall.trigger_at)]
    (sid, event), = sent.events
    assert sid == str(session.id)
    assert event == {"type": "recall_update", "session_id": str(session.id), "recall_id": str(recall.id),
                     "call_type": "once", "trigger_at": recall.trigger_at.isoformat(), "status": "pending",
                     "action": "scheduled"}
    assert event_from_dict(event).to_dict() == event


def test_nothing_is_sent_before_commit(session, sent, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        schedule(session)
    assert sent.tasks == [] and sent.events == [] and len(callbacks) == 2


def test_immediate_triggers_now(session) -> None:
    recall = schedule(session, call_type="immediate", when="in 5 hours")
    assert abs((recall.trigger_at - timezone.now()).total_seconds()) < 2


def test_recurring_accepts_interval_strings(session) -> None:
    recall = schedule(session, call_type="recurring", interval_seconds="5m")
    assert recall.interval_seconds == 300


def test_a_recurring_start_that_has_passed_anchors_the_series(session) -> None:
    """A model writes the time it was told as the start ("13:00Z" at 13:00:40): the series begins at
    the first occurrence after now, on the anchor's rhythm. A one-off in the past is still refused."""
    now = datetime(2026, 11, 25, 13, 0, 40, tzinfo=UTC)
    recall = schedule(session, call_type="recurring", when="2026-11-25T13:00Z", interval_seconds=3600, now=now)
    assert recall.trigger_at == datetime(2026, 11, 25, 14, 0, tzinfo=UTC)
    recall.delete()
    recall = schedule(session, call_type="recurring", when="2026-11-25T09:15Z", interval_seconds=1800, now=now)
    assert recall.trigger_at == datetime(2026, 11, 25, 13, 15, tzinfo=UTC)
    recall.delete()
    with pytest.raises(BadRequest, match="not in the future"):
        schedule(session, call_type="once", when="2026-11-25T13:00Z", now=now)


def test_timezone_offset_applies(session) -> None:
    recall = schedule(session, when="tomorrow at 09:00", timezone_offset="+02:00")
    local = recall.trigger_at.astimezone(timezone.get_fixed_timezone(120))
    assert (local.hour, local.minute) == (9, 0)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"call_type": "recurring"}, "needs interval_seconds"),
        ({"call_type": "recurring", "interval_seconds": 30}, "too short"),
        ({"call_type": "recurring", "interval_seconds": "every fortnight-ish"}, "not a duration"),
        ({"call_type": "once", "interval_seconds": 300}, "only for call_type='recurring'"),
        ({"when": "2020-01-01T00:00:00Z"}, "not in the future"),
        ({"when": "today at 00:00"}, "not in the future"),
        ({"when": ""}, "'when' is required"),
        ({"when": None}, "'when' is required"),
        ({"when": "whenever"}, "Accepted forms"),
        ({"additional_context_message": "   "}, "additional_context_message is required"),
        ({"additional_context_message": "x" * 9000}, "too long"),
        ({"call_type": "sometimes"}, "not one of: once, recurring, immediate"),
        ({"timezone_offset": "CEST", "when": "tomorrow at 9am"}, "timezone_offset"),
    ],
)
def test_bad_input(session, sent, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        schedule(session, **kw)
    assert not Recall.objects.exists() and sent.tasks == [] and sent.events == []


def test_minimum_interval_is_configurable(session, settings) -> None:
    settings.RECALL_MIN_INTERVAL_SECONDS = 10
    assert schedule(session, call_type="recurring", interval_seconds=30).interval_seconds == 30


def test_second_pending_recall_is_refused_with_advice(session) -> None:
    schedule(session)
    with pytest.raises(Conflict, match=r'manage_recall\(action="cancel"\)') as info:
        schedule(session, call_type="immediate")
    assert info.value.status == 409
    assert Recall.objects.filter(session=session).count() == 1


def test_constraint_race_becomes_the_same_conflict(session, monkeypatch) -> None:
    """Two callers both saw no pending recall; the database refuses the second insert."""
    schedule(session)
    monkeypatch.setattr(services, "recall_pending", lambda session: None)
    with pytest.raises(Conflict, match="cancel the existing one first"):
        schedule(session)


def test_pending_recalls_in_other_sessions_do_not_conflict(session, other_session) -> None:
    schedule(session)
    schedule(other_session)


def test_cancel_then_schedule_again(session, sent, django_capture_on_commit_callbacks) -> None:
    first = schedule(session)
    with django_capture_on_commit_callbacks(execute=True):
        cancelled = services.recall_cancel(session=session)
    assert cancelled is not None and cancelled.id == first.id and cancelled.status == "cancelled"
    assert sent.recall_updates()[-1]["action"] == "cancelled"
    assert sent.recall_updates()[-1]["status"] == "cancelled"
    assert services.recall_cancel(session=session) is None
    second = schedule(session)
    assert services.recall_pending(session=session).id == second.id


def test_skip_advances_by_interval(session, sent, django_capture_on_commit_callbacks) -> None:
    recall = make_recall(session, call_type="recurring", due_in=600, interval=300)
    old = recall.trigger_at
    with django_capture_on_commit_callbacks(execute=True):
        skipped = services.recall_skip(session=session)
    assert skipped.trigger_at == old + timedelta(seconds=300)
    assert sent.recall_updates()[-1]["action"] == "rescheduled"
    assert sent.tasks == [(str(recall.id), skipped.trigger_at)]


def test_skip_never_schedules_into_the_past(session) -> None:
    """An overdue recurring recall (its task was lost) skips to now + interval, not to the past."""
    make_recall(session, call_type="recurring", due_in=-3600, interval=300)
    now = timezone.now()
    skipped = services.recall_skip(session=session, now=now)
    assert skipped.trigger_at == now + timedelta(seconds=300)
    assert skipped.trigger_at > timezone.now()


@pytest.mark.parametrize("setup", ["none", "once", "cancelled_recurring"])
def test_skip_needs_a_recurring_pending_recall(session, setup: str) -> None:
    if setup == "once":
        make_recall(session, due_in=600)
    if setup == "cancelled_recurring":
        make_recall(session, call_type="recurring", status="cancelled")
    with pytest.raises(BadRequest, match="no recurring pending recall"):
        services.recall_skip(session=session)


def test_next_occurrence_skips_missed_ones() -> None:
    base = timezone.now().replace(microsecond=0)
    assert services.next_occurrence(trigger_at=base, interval_seconds=60, now=base) == base + timedelta(seconds=60)
    later = base + timedelta(seconds=3599)
    nxt = services.next_occurrence(trigger_at=base, interval_seconds=60, now=later)
    assert nxt == base + timedelta(seconds=3600)
    exact = base + timedelta(seconds=3600)
    assert services.next_occurrence(trigger_at=base, interval_seconds=60, now=exact) == base + timedelta(seconds=3660)


# -- the partial unique index, at the database level ---------------------------------------------


def test_db_refuses_two_pending_recalls(session) -> None:
    make_recall(session)
    with pytest.raises(IntegrityError), transaction.atomic():
        make_recall(session)


def test_db_accepts_pending_next_to_finished_and_firing_once(session) -> None:
    make_recall(session, status="fired")
    make_recall(session, status="cancelled")
    make_recall(session, status="firing")  # a once recall being fired does not hold the slot
    make_recall(session, status="pending")
    assert Recall.objects.filter(session=session).count() == 4


def test_db_firing_recurring_keeps_its_slot(session) -> None:
    make_recall(session, call_type="recurring", status="firing")
    with pytest.raises(IntegrityError), transaction.atomic():
        make_recall(session)
    with pytest.raises(Conflict):
        schedule(session)
