"""Firing: claim at most once, capacity, outcomes (steps 1-11), the sweep, interrupted runs."""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from recall_app import firing, tasks
from recall_app.models import Recall, RecallRun
from sessions_app.services import message_append, session_create
from tests.recall.conftest import make_recall


def _fired(recall_id: Any) -> Recall:
    return Recall.objects.get(pk=recall_id)


# -- claim ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_have_exactly_one_winner(user) -> None:
    session = session_create(owner=user)
    recall = make_recall(session)
    barrier = threading.Barrier(6)
    results: list[firing.ClaimResult] = []
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait(5)
            results.append(firing.claim_recall(str(recall.id), due=recall.trigger_at, worker=f"w{n}"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    winners = [r for r in results if r.claim is not None]
    assert len(winners) == 1 and len(results) == 6
    assert {r.reason for r in results if r.claim is None} == {"not_claimable"}
    recall.refresh_from_db()
    assert recall.status == "firing" and recall.claim_token == winners[0].claim.token
    assert RecallRun.objects.filter(recall=recall).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_worker_threads_racing_fire_recall_run_it_once(user, fake_run) -> None:
    """The embedded tier's "two workers": whole fire_recall calls (defer check, claim, run, finish) race."""
    session = session_create(owner=user)
    recall = make_recall(session)
    barrier = threading.Barrier(4)
    results: list[str] = []

    def worker(n: int) -> None:
        try:
            barrier.wait(5)
            results.append(firing.fire_recall(str(recall.id), due=recall.trigger_at, worker=f"w{n}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == ["not_claimable"] * 3 + ["success"]
    assert len(fake_run.calls) == 1
    assert _fired(recall.id).fire_count == 1 and RecallRun.objects.filter(recall=recall).count() == 1


@pytest.mark.django_db
def test_an_embedded_server_that_is_stopping_claims_nothing(session, fake_run, monkeypatch) -> None:
    """A recall due while `manage.py start` shuts down stays pending for the next start's sweep
    (claimed now, its run would die with the process and end interrupted)."""
    from navi_site import embedded

    monkeypatch.setattr(embedded, "_shutting_down", threading.Event())
    recall = make_recall(session)
    embedded.begin_shutdown()
    assert firing.fire_recall(str(recall.id), due=recall.trigger_at) == "shutting_down"
    assert fake_run.calls == [] and _fired(recall.id).status == "pending"
    assert RecallRun.objects.filter(recall=recall).count() == 0


@pytest.mark.django_db
def test_a_redelivered_task_is_a_no_op(session, fake_run) -> None:
    recall = make_recall(session)
    due = recall.trigger_at.isoformat()
    assert tasks.fire.apply(args=[str(recall.id), due]).get() == "success"
    assert tasks.fire.apply(args=[str(recall.id), due]).get() == "not_claimable"
    assert len(fake_run.calls) == 1 and _fired(recall.id).fire_count == 1


@pytest.mark.django_db
def test_a_stale_task_of_an_earlier_occurrence_does_not_fire(session, fake_run) -> None:
    recall = make_recall(session, call_type="recurring")
    stale = recall.trigger_at - timedelta(seconds=300)
    assert firing.fire_recall(str(recall.id), due=stale) == "not_claimable"
    assert fake_run.calls == []


@pytest.mark.django_db
def test_not_due_yet_is_not_claimed(session, fake_run) -> None:
    recall = make_recall(session, due_in=600)
    assert firing.fire_recall(str(recall.id), due=recall.trigger_at) == "not_claimable"
    assert _fired(recall.id).status == "pending"


@pytest.mark.django_db
def test_capacity_is_deployment_wide(user, settings, fake_run) -> None:
    settings.RECALL_MAX_CONCURRENT = 2
    recalls = [make_recall(session_create(owner=user)) for _ in range(3)]
    assert firing.claim_recall(str(recalls[0].id)).claim is not None
    assert firing.claim_recall(str(recalls[1].id)).claim is not None
    assert firing.claim_recall(str(recalls[2].id)).reason == "at_capacity"
    assert firing.fire_recall(str(recalls[2].id)) == "at_capacity"
    assert _fired(recalls[2].id).status == "pending" and fake_run.calls == []
    # an expired lease (dead worker) frees its slot
    Recall.objects.filter(pk=recalls[0].id).update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert firing.fire_recall(str(recalls[2].id)) == "success"


@pytest.mark.django_db
def test_a_run_that_ends_hands_its_slot_to_a_recall_that_found_none(user, settings, fake_run, sent) -> None:
    """Not at the next sweep: the recall that met a full house fires as soon as a slot is free."""
    settings.RECALL_MAX_CONCURRENT = 1
    first, waiting = (make_recall(session_create(owner=user)) for _ in range(2))
    result = firing.claim_recall(str(first.id))
    assert firing.fire_recall(str(waiting.id), due=waiting.trigger_at) == "at_capacity"
    assert sent.tasks == []
    firing._fire_claimed(result.claim)
    assert sent.tasks == [(str(waiting.id), waiting.trigger_at)]
    assert firing.fire_recall(str(waiting.id), due=waiting.trigger_at) == "success"


# -- outcomes --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_once_success_is_fired_and_recorded(session, user, fake_run, sent, django_capture_on_commit_callbacks) -> None:
    recall = make_recall(session, internal_comment="Check build logs")

    def produce_messages() -> None:
        message_append(session_id=session.id, role="user", content="recall", is_recall=True)
        message_append(session_id=session.id, role="assistant", content="done")

    fake_run.during = produce_messages
    with django_capture_on_commit_callbacks(execute=True):
        assert firing.fire_recall(str(recall.id), due=recall.trigger_at, worker="w1") == "success"
    recall.refresh_from_db()
    assert (recall.status, recall.fire_count, recall.claim_token) == ("fired", 1, "")
    call, = fake_run.calls
    assert call["user_id"] == user.pk and call["role"] == "staff" and call["ctx_session"] == str(session.id)
    assert "Read /tmp/build.log with filesystem." in call["instruction"] and "Check build logs" in call["instruction"]
    run, = recall.runs.all()
    assert run.outcome == "success" and run.finished_at and run.worker == "w1"
    assert (run.first_message_seq, run.last_message_seq, run.message_count) == (1, 2, 2)
    assert sent.recall_updates()[-1] | {"recall_id": None} == {
        "type": "recall_update", "session_id": str(session.id), "recall_id": None, "call_type": "once",
        "trigger_at": recall.trigger_at.isoformat(), "status": "fired", "action": "fired"}


@pytest.mark.django_db
@pytest.mark.parametrize("outcome", ["max_iterations", "stopped"])
def test_max_iterations_and_stop_count_as_success(session, fake_run, outcome: str) -> None:
    recall = make_recall(session)
    fake_run.outcome = outcome
    assert firing.fire_recall(str(recall.id)) == outcome
    assert _fired(recall.id).status == "fired"
    assert recall.runs.get().outcome == outcome


@pytest.mark.django_db
def test_once_failure_is_cancelled_and_the_error_recorded(session, fake_run, sent,
                                                          django_capture_on_commit_callbacks) -> None:
    recall = make_recall(session)
    fake_run.error = RuntimeError("backend unreachable")
    with django_capture_on_commit_callbacks(execute=True):
        assert firing.fire_recall(str(recall.id)) == "error"
    assert _fired(recall.id).status == "cancelled"
    run = recall.runs.get()
    assert run.outcome == "error" and "backend unreachable" in run.error
    assert sent.types()[-2:] == ["recall_update", "session_sync"]
    assert sent.recall_updates()[-1]["action"] == "cancelled"


@pytest.mark.django_db
@pytest.mark.parametrize("fails", [False, True])
def test_recurring_is_rescheduled_skipping_missed_occurrences(session, fake_run, sent, fails: bool,
                                                               django_capture_on_commit_callbacks) -> None:
    recall = make_recall(session, call_type="recurring", due_in=-1000, interval=300)
    first_trigger = recall.trigger_at
    if fails:
        fake_run.error = RuntimeError("boom")
    with django_capture_on_commit_callbacks(execute=True):
        firing.fire_recall(str(recall.id))
    recall.refresh_from_db()
    assert recall.status == "pending" and recall.fire_count == 1
    assert recall.trigger_at > timezone.now()
    assert (recall.trigger_at - first_trigger).total_seconds() % 300 == 0
    assert recall.trigger_at - timezone.now() <= timedelta(seconds=300)
    assert sent.recall_updates()[-1]["action"] == "rescheduled"
    assert sent.tasks[-1] == (str(recall.id), recall.trigger_at)


@pytest.mark.django_db
def test_busy_session_defers_by_a_minute(session, fake_run, monkeypatch, sent,
                                         django_capture_on_commit_callbacks) -> None:
    from recall_app import headless

    monkeypatch.setattr(headless, "session_is_busy", lambda session_id: True)
    recall = make_recall(session)
    with django_capture_on_commit_callbacks(execute=True):
        assert firing.fire_recall(str(recall.id), due=recall.trigger_at) == "deferred"
    recall.refresh_from_db()
    assert recall.status == "pending" and fake_run.calls == []
    assert timedelta(seconds=55) < recall.trigger_at - timezone.now() <= timedelta(seconds=60)
    assert recall.runs.get().outcome == "deferred"
    assert sent.recall_updates()[-1]["action"] == "rescheduled"
    assert sent.tasks == [(str(recall.id), recall.trigger_at)]


@pytest.mark.django_db
def test_a_turn_that_ends_while_its_recall_is_deferred_does_not_leave_it_waiting(
        session, fake_run, monkeypatch, sent, django_capture_on_commit_callbacks) -> None:
    """The turn's end hook ran between the busy check and the deferral: the deferral itself sees the session
    free and the recall is due at once, not a minute later."""
    from recall_app import headless

    seen = iter([True, False])  # busy when checked; free once the deferral is written
    monkeypatch.setattr(headless, "session_is_busy", lambda session_id: next(seen))
    recall = make_recall(session, call_type="immediate", due_in=-1)
    with django_capture_on_commit_callbacks(execute=True):
        assert firing.fire_recall(str(recall.id), due=recall.trigger_at) == "deferred"
    recall.refresh_from_db()
    assert recall.status == "pending" and recall.trigger_at <= timezone.now()
    assert sent.tasks[-1] == (str(recall.id), recall.trigger_at)  # its fire task goes out now


@pytest.mark.django_db
def test_run_that_finds_the_session_busy_releases_the_claim(session, fake_run) -> None:
    recall = make_recall(session)
    fake_run.outcome = "busy"
    assert firing.fire_recall(str(recall.id)) == "busy"
    recall.refresh_from_db()
    assert recall.status == "pending" and recall.claim_token == "" and recall.fire_count == 0
    assert recall.trigger_at > timezone.now()
    assert recall.runs.get().outcome == "deferred"


@pytest.mark.django_db
def test_cancel_during_the_run_wins(session, fake_run) -> None:
    from recall_app import services

    recall = make_recall(session, call_type="recurring")
    fake_run.during = lambda: services.recall_cancel(session=session)
    firing.fire_recall(str(recall.id))
    recall.refresh_from_db()
    assert recall.status == "cancelled"
    assert recall.runs.get().outcome == "success"


@pytest.mark.django_db
def test_a_once_run_may_schedule_its_own_follow_up(session, fake_run) -> None:
    from recall_app import services

    recall = make_recall(session)
    follow_up: list[Recall] = []
    fake_run.during = lambda: follow_up.append(services.recall_schedule(
        session=session, call_type="once", when="10m", additional_context_message="Check again."))
    assert firing.fire_recall(str(recall.id)) == "success"
    assert _fired(recall.id).status == "fired"
    assert services.recall_pending(session=session).id == follow_up[0].id


@pytest.mark.django_db
def test_the_lease_is_renewed_while_the_run_lives(session, fake_run, settings) -> None:
    import asyncio

    from asgiref.sync import sync_to_async

    settings.RECALL_CLAIM_LEASE_SECONDS = 0.3
    recall = make_recall(session)
    seen: list[Any] = []

    async def long_run() -> None:
        await asyncio.sleep(0.6)
        seen.append(await sync_to_async(lambda: _fired(recall.id).claimed_until)())

    fake_run.during = long_run
    started = timezone.now()
    assert firing.fire_recall(str(recall.id)) == "success"
    assert seen[0] > started + timedelta(seconds=0.6)


@pytest.mark.django_db
def test_without_the_run_registry_the_run_is_an_error(session, monkeypatch) -> None:
    from recall_app import headless

    monkeypatch.setattr(headless, "_runs", lambda: None)
    recall = make_recall(session)
    assert firing.fire_recall(str(recall.id)) == "error"
    assert "run_recall_turn" in recall.runs.get().error


@pytest.mark.django_db
def test_deleted_session_leaves_nothing_to_fire(session, fake_run) -> None:
    recall = make_recall(session)
    session.delete()
    assert firing.fire_recall(str(recall.id)) == "not_claimable"
    assert fake_run.calls == []


# -- the sweep ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sweep_fires_a_recall_whose_task_was_lost(session, fake_run, sent) -> None:
    overdue = make_recall(session, due_in=-30)
    make_recall(session_create(owner=session.owner), due_in=600)  # not due
    result = tasks.sweep.apply().get()
    assert result == {"interrupted": 0, "dispatched": [str(overdue.id)]}
    (rid, due), = sent.tasks
    assert tasks.fire.apply(args=[rid, due.isoformat()]).get() == "success"
    assert _fired(overdue.id).status == "fired"


@pytest.mark.django_db
def test_sweep_respects_capacity_and_grace(user, settings, sent) -> None:
    settings.RECALL_MAX_CONCURRENT = 1
    busy = make_recall(session_create(owner=user))
    firing.claim_recall(str(busy.id))
    make_recall(session_create(owner=user), due_in=-30)
    assert firing.dispatch_due() == []
    settings.RECALL_MAX_CONCURRENT = 3
    just_due = make_recall(session_create(owner=user), due_in=0)
    assert str(just_due.id) not in firing.dispatch_due()  # its own ETA task gets the first chance


@pytest.mark.django_db
@pytest.mark.parametrize(("call_type", "status"), [("once", "cancelled"), ("recurring", "pending")])
def test_sweep_ends_a_dead_workers_claim_as_interrupted(session, call_type: str, status: str, sent,
                                                        django_capture_on_commit_callbacks) -> None:
    recall = make_recall(session, call_type=call_type)
    claim = firing.claim_recall(str(recall.id), worker="doomed").claim
    assert claim is not None
    message_append(session_id=session.id, role="user", content="recall", is_recall=True)
    assert firing.recover_expired_claims() == 0  # the lease still runs
    Recall.objects.filter(pk=recall.id).update(claimed_until=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert firing.sweep()["interrupted"] == 1
    recall.refresh_from_db()
    assert recall.status == status and recall.claim_token == ""
    if call_type == "recurring":
        assert recall.trigger_at > timezone.now()
    run = recall.runs.get()
    assert run.outcome == "interrupted" and run.finished_at and "killed or restarted" in run.error
    assert (run.first_message_seq, run.last_message_seq) == (1, 1)
    assert sent.types()[-2:] == ["recall_update", "session_sync"]
    # the dead worker's late finish changes nothing
    assert firing.finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id,
                               outcome="success") is None


@pytest.mark.django_db
def test_fire_recall_command(session, fake_run) -> None:
    from io import StringIO

    from django.core.management import call_command

    recall = make_recall(session, due_in=3600)
    out = StringIO()
    call_command("fire_recall", str(recall.id), stdout=out)
    assert out.getvalue().startswith("success") and _fired(recall.id).status == "fired"
    call_command("list_recalls", "--status", "fired", stdout=out)
    assert str(recall.id) in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_deferred_recall_fires_when_the_turn_ends(user, sent) -> None:
    session = session_create(owner=user)
    recall = make_recall(session, call_type="immediate", due_in=-1)
    now = timezone.now()
    assert firing._defer(recall, now=now)  # the session was busy
    recall.refresh_from_db()
    assert recall.trigger_at > now + timedelta(seconds=30)
    from sessions_app.hooks import run_turn_finished_hooks

    run_turn_finished_hooks(str(session.id))  # the registry calls this when the turn ends
    recall.refresh_from_db()
    assert recall.status == "pending" and recall.trigger_at <= timezone.now()
    assert sent.tasks[-1] == (str(recall.id), recall.trigger_at)  # its fire task goes out now


@pytest.mark.django_db(transaction=True)
def test_turn_end_leaves_a_future_recall_alone(user) -> None:
    session = session_create(owner=user)
    recall = make_recall(session, due_in=3600)
    from sessions_app.hooks import run_turn_finished_hooks

    run_turn_finished_hooks(str(session.id))
    assert Recall.objects.get(pk=recall.pk).trigger_at == recall.trigger_at
