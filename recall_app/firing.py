"""Firing recalls (spec 004 ``_fire_recall`` steps 1-11), driven by Celery.

Each occurrence fires at most once: a worker owns it only after an atomic conditional
UPDATE ``pending -> firing`` on (id, status, trigger_at) changed one row; a redelivered
or duplicate task finds nothing to claim. The claim is a lease (``claimed_until``)
renewed by a heartbeat while the run lives; a claim whose lease ran out belongs to a
dead worker, and the sweep ends it as ``interrupted`` (once: cancelled; recurring:
rescheduled). At most RECALL_MAX_CONCURRENT live claims exist deployment-wide: the
capacity check and the claim happen under one lock (PostgreSQL advisory lock; SQLite
serialises writers with BEGIN IMMEDIATE). At capacity a recall stays pending; the next
run to end hands its slot over (dispatches the due ones), the sweep is the safety net.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import structlog
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agent import ctx
from recall_app import enqueue, headless, notify, signals
from recall_app.models import Recall, RecallRun
from recall_app.services import next_occurrence
from sessions_app.models import Session

log = structlog.get_logger(__name__)

_ADVISORY_LOCK_KEY = 0x4E415649_5243  # "NAVIRC"
SUCCESS_OUTCOMES = frozenset({"success", "max_iterations", "stopped", "time_limit"})
INTERRUPTED_ERROR = "The worker running this recall stopped (killed or restarted) before the run finished."


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def lease_seconds() -> float:
    """How long a claim lives without a heartbeat; the heartbeat renews it every third of that."""
    return float(getattr(settings, "RECALL_CLAIM_LEASE_SECONDS", 120))


def default_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    recall_id: str
    session_id: str
    token: str
    due_at: datetime
    run_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimResult:
    claim: Claim | None
    reason: str  # claimed / at_capacity / not_claimable


def _lock_claims() -> None:
    """Serialise capacity check + claim across workers (call inside a transaction)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_LOCK_KEY])


def running_count(*, now: datetime) -> int:
    """Live claims deployment-wide (expired leases are dead workers and do not count)."""
    return Recall.objects.filter(status=Recall.Status.FIRING, claimed_until__gt=now).count()


def claim_recall(
    recall_id: str, *, due: datetime | None = None, worker: str = "", now: datetime | None = None,
    force: bool = False,
) -> ClaimResult:
    """Claim the due occurrence of a pending recall. ``due`` pins the occurrence (the ETA task's
    trigger_at); ``force`` claims it even before it is due (manage.py fire_recall)."""
    now = now or timezone.now()
    token = uuid.uuid4().hex
    with transaction.atomic():
        _lock_claims()
        qs = Recall.objects.filter(pk=recall_id, status=Recall.Status.PENDING)
        if due is not None:
            qs = qs.filter(trigger_at=due)
        if not force:
            qs = qs.filter(trigger_at__lte=now)
        if running_count(now=now) >= _setting("RECALL_MAX_CONCURRENT", 3):
            return ClaimResult(claim=None, reason="at_capacity" if qs.exists() else "not_claimable")
        claimed = qs.update(
            status=Recall.Status.FIRING, claim_token=token, claimed_by=worker[:200],
            claimed_until=now + timedelta(seconds=lease_seconds()), updated_at=now,
        )
        if claimed != 1:
            return ClaimResult(claim=None, reason="not_claimable")
        recall = Recall.objects.get(pk=recall_id)
        next_seq = Session.objects.filter(pk=recall.session_id).values_list("next_seq", flat=True).first()
        run = RecallRun.objects.create(
            recall=recall, claim_token=token, due_at=recall.trigger_at, started_at=now,
            worker=worker[:200], first_message_seq=next_seq,
        )
    claim = Claim(recall_id=str(recall.id), session_id=str(recall.session_id), token=token,
                  due_at=recall.trigger_at, run_id=run.pk)
    log.info("recall_claimed", recall_id=claim.recall_id, session_id=claim.session_id, worker=worker)
    return ClaimResult(claim=claim, reason="claimed")


def extend_lease(token: str) -> bool:
    """Heartbeat: push the lease forward. False when the claim is gone (cancelled meanwhile)."""
    until = timezone.now() + timedelta(seconds=lease_seconds())
    return bool(Recall.objects.filter(claim_token=token, status=Recall.Status.FIRING).update(claimed_until=until))


def _defer(recall: Recall, *, now: datetime, token: str | None = None) -> bool:
    """Step 1: move a due occurrence to now + RECALL_DEFER_SECONDS (the session is busy). Without
    ``token`` the recall is still pending; with it, the claim is released."""
    new_trigger = (now + timedelta(seconds=_setting("RECALL_DEFER_SECONDS", 60))).replace(microsecond=0)
    fields: dict[str, Any] = {"status": Recall.Status.PENDING, "trigger_at": new_trigger, "updated_at": now,
                              "claim_token": "", "claimed_by": "", "claimed_until": None}
    qs = Recall.objects.filter(pk=recall.pk)
    if token:
        qs = qs.filter(claim_token=token, status=Recall.Status.FIRING)
    else:
        qs = qs.filter(status=Recall.Status.PENDING, trigger_at=recall.trigger_at)
    with transaction.atomic():
        try:
            with transaction.atomic():
                updated = qs.update(**fields)
        except IntegrityError:  # a once recall whose slot a newer pending recall took: it wins
            qs.update(status=Recall.Status.CANCELLED, claim_token="", claimed_by="", claimed_until=None)
            recall.status = Recall.Status.CANCELLED
            notify.on_commit_publish(recall, "cancelled")
            return False
        if not updated:
            return False
        if not token:
            RecallRun.objects.create(recall=recall, due_at=recall.trigger_at, started_at=now, finished_at=now,
                                     outcome=RecallRun.Outcome.DEFERRED, error="session busy")
        recall.trigger_at, recall.status = new_trigger, Recall.Status.PENDING
        notify.on_commit_publish(recall, "rescheduled")
        notify.on_commit_enqueue(recall)
    log.info("recall_deferred", recall_id=str(recall.pk), trigger_at=new_trigger.isoformat())
    return True


def _defer_if_busy(recall_id: str, *, due: datetime | None, now: datetime) -> bool:
    recall = Recall.objects.filter(pk=recall_id, status=Recall.Status.PENDING, trigger_at__lte=now).first()
    if recall is None or (due is not None and recall.trigger_at != due):
        return False
    if not headless.session_is_busy(str(recall.session_id)):
        return False
    if not _defer(recall, now=now):
        return False
    if not headless.session_is_busy(str(recall.session_id)):
        # The turn ended between the check and the deferral: its end hook (``fire_deferred_after_turn``) may
        # have looked before the deferral was written, and the recall would have waited RECALL_DEFER_SECONDS
        # for a session that is free (a loaded CI machine saw an immediate recall's result arrive too late).
        fire_deferred_after_turn(str(recall.session_id))
    return True


@contextlib.contextmanager
def user_context(session: Session) -> Iterator[None]:
    """Step 3: the session owner's identity for tools (restored afterwards)."""
    owner = session.owner
    saved = ctx.snapshot()
    ctx.current_session_id.set(str(session.id))
    ctx.current_user_id.set(owner.pk)
    ctx.current_user_role.set("staff" if owner.is_staff else "user")
    ctx.current_user_info.set({"id": owner.pk, "username": owner.get_username(),
                               "name": owner.get_full_name() or owner.get_username()})
    try:
        yield
    finally:
        ctx.restore(saved)


async def _heartbeat(token: str) -> None:
    interval = max(lease_seconds() / 3, 0.05)
    while True:
        await asyncio.sleep(interval)
        if not await sync_to_async(extend_lease)(token):
            return


def _outcome_of(result: str) -> tuple[str, str]:
    """(outcome, error) of a run's outcome text ("error: <message>" → ("error", message))."""
    if result == "error" or result.startswith("error:"):
        return "error", result.partition(":")[2].strip() or "the recall run failed"
    return result, ""


async def _run_leased(claim: Claim, session: Session, recall: Recall, finished: dict[str, str]) -> str:
    """Steps 3-7: user context, then the headless run, with the lease renewed meanwhile.

    Steps 8-10 happen as the run ends, before its final ``session_sync`` (spec 004: the client
    hears ``recall_update`` first); ``finished`` then holds the recorded outcome and error."""

    async def on_end(result: Any) -> None:
        outcome, error = _outcome_of(str(result.outcome))
        await sync_to_async(finish_claim, thread_sensitive=False)(
            recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id, outcome=outcome, error=error)
        finished.update(outcome=outcome, error=error)

    beat = asyncio.ensure_future(_heartbeat(claim.token))
    try:
        with user_context(session):
            return await headless.run_headless(
                session=session, recall=recall, instruction=headless.build_instruction(recall), on_end=on_end)
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat


def _message_range(run: RecallRun, session_id: str) -> tuple[int | None, int | None]:
    next_seq = Session.objects.filter(pk=session_id).values_list("next_seq", flat=True).first()
    first = run.first_message_seq
    if first is None or next_seq is None or next_seq <= first:
        return None, None
    return first, next_seq - 1


def _record_run(claim_token: str, run_id: int | None, *, outcome: str, error: str, now: datetime,
                session_id: str) -> int | None:
    """Finish the claim's run row(s); returns the (last) run's id."""
    qs = RecallRun.objects.filter(pk=run_id) if run_id else RecallRun.objects.filter(
        claim_token=claim_token, finished_at__isnull=True)
    for run in qs:
        run_id = run.pk
        run.first_message_seq, run.last_message_seq = _message_range(run, session_id)
        run.outcome, run.error, run.finished_at = outcome, error[:4000], now
        run.save(update_fields=["first_message_seq", "last_message_seq", "outcome", "error", "finished_at"])
    return run_id


def _apply_result(recall: Recall, *, outcome: str, now: datetime) -> str:
    """Steps 8-10 on a locked, still-claimed row; returns the recall_update action."""
    recall.fire_count += 1
    recall.last_fired_at = now
    recall.claim_token, recall.claimed_by, recall.claimed_until = "", "", None
    if recall.call_type == Recall.CallType.RECURRING and recall.interval_seconds:
        recall.status = Recall.Status.PENDING
        recall.trigger_at = next_occurrence(trigger_at=recall.trigger_at, interval_seconds=recall.interval_seconds,
                                            now=now)
        return "rescheduled"
    recall.status = Recall.Status.FIRED if outcome in SUCCESS_OUTCOMES else Recall.Status.CANCELLED
    return "fired" if recall.status == Recall.Status.FIRED else "cancelled"


def _save_result(recall: Recall, *, outcome: str, now: datetime) -> str:
    action = _apply_result(recall, outcome=outcome, now=now)
    try:
        with transaction.atomic():
            recall.save()
    except IntegrityError:  # a new pending recall took the slot meanwhile: the newer one wins
        recall.status = Recall.Status.CANCELLED
        recall.save()
        action = "cancelled"
    notify.on_commit_publish(recall, action)
    if recall.status == Recall.Status.PENDING:
        notify.on_commit_enqueue(recall)
    return action


def finish_claim(*, recall_id: str, token: str, run_id: int | None, outcome: str, error: str = "",
                 now: datetime | None = None) -> str | None:
    """Record how the claimed occurrence ended and move the recall on (steps 8-10). Returns the
    action published, or None when the recall was cancelled (or deleted) while it ran."""
    now = now or timezone.now()
    with transaction.atomic():
        recall = Recall.objects.select_for_update().filter(pk=recall_id).first()
        session_id = str(recall.session_id) if recall else ""
        run_outcome = RecallRun.Outcome.DEFERRED if outcome == "busy" else outcome
        run_id = _record_run(token, run_id, outcome=run_outcome, error=error, now=now, session_id=session_id)
        if recall is None or recall.status != Recall.Status.FIRING or recall.claim_token != token:
            return None
        if outcome == "busy":
            action: str | None = "rescheduled" if _defer(recall, now=now, token=token) else None
        else:
            action = _save_result(recall, outcome=outcome, now=now)
            transaction.on_commit(partial(
                signals.send_run_finished, recall_id=str(recall.pk), session_id=session_id,
                owner_id=_owner_id(session_id), outcome=run_outcome, error=error, run_id=run_id), robust=True)
    log.info("recall_finished", recall_id=recall_id, outcome=outcome, action=action,
             trigger_at=recall.trigger_at.isoformat())
    return action


def _owner_id(session_id: str) -> int | None:
    return Session.objects.filter(pk=session_id).values_list("owner_id", flat=True).first()


def _fire_claimed(claim: Claim) -> str:
    session = Session.objects.select_related("owner").filter(pk=claim.session_id).first()
    recall = Recall.objects.filter(pk=claim.recall_id).first()
    if session is None or recall is None:  # step 2 (the cascade usually removed the recall too)
        log.info("recall_session_deleted", recall_id=claim.recall_id, session_id=claim.session_id)
        finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id,
                     outcome=RecallRun.Outcome.CANCELLED_DELETED_SESSION)
        return RecallRun.Outcome.CANCELLED_DELETED_SESSION
    error = ""
    finished: dict[str, str] = {}
    try:
        outcome = async_to_sync(_run_leased)(claim, session, recall, finished)
    except headless.HeadlessRunError as exc:
        outcome, error = "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - step 10: any failure of the run is an outcome
        log.exception("recall_run_failed", recall_id=claim.recall_id, session_id=claim.session_id)
        outcome, error = "error", f"{type(exc).__name__}: {exc}"
    if finished:  # recorded as the run ended, and the run's own session_sync followed
        _hand_over_slot()
        return finished["outcome"]
    try:
        finish_claim(recall_id=claim.recall_id, token=claim.token, run_id=claim.run_id, outcome=outcome,
                     error=error)
    finally:
        # Step 11: a run that never started (busy, failure before it began) sent no session_sync.
        if outcome not in SUCCESS_OUTCOMES:
            notify.on_commit_session_sync(claim.session_id)
        _hand_over_slot()
    return outcome


def _hand_over_slot() -> None:
    """This run's slot is free: recalls that came due while every slot was taken (their own task
    found ``at_capacity`` and left them pending) fire now, not at the next sweep (up to grace +
    RECALL_SWEEP_SECONDS later). A duplicate task this may send is harmless: claims are at most once."""
    try:
        dispatch_due(grace=0.0)
    except Exception:  # noqa: BLE001 - the sweep is still the safety net
        log.warning("recall_hand_over_failed", exc_info=True)


def fire_recall(recall_id: str, *, due: datetime | None = None, worker: str = "", force: bool = False) -> str:
    """Fire the due occurrence of a recall (``due``: the one the ETA task was sent for).
    Returns what happened: deferred, at_capacity, not_claimable, shutting_down, or the run outcome."""
    if headless.server_stopping():  # the next start's sweep fires it (the memory broker dies with us)
        log.info("recall_not_claimed", recall_id=recall_id, reason="shutting_down")
        return "shutting_down"
    now = timezone.now()
    if not force and _defer_if_busy(recall_id, due=due, now=now):
        return "deferred"
    result = claim_recall(recall_id, due=due, worker=worker or default_worker(), now=now, force=force)
    if result.claim is None:
        log.info("recall_not_claimed", recall_id=recall_id, reason=result.reason)
        return result.reason
    return _fire_claimed(result.claim)


def recover_expired_claims(*, now: datetime | None = None) -> int:
    """End claims whose lease ran out (their worker died) as ``interrupted``; returns how many."""
    now = now or timezone.now()
    expired = list(Recall.objects.filter(status=Recall.Status.FIRING, claimed_until__lt=now)
                   .values_list("pk", "claim_token", "session_id"))
    done = 0
    for pk, token, session_id in expired:
        action = finish_claim(recall_id=str(pk), token=token, run_id=None, outcome=RecallRun.Outcome.INTERRUPTED,
                              error=INTERRUPTED_ERROR, now=now)
        if action is not None:
            done += 1
            notify.on_commit_session_sync(str(session_id))
            log.warning("recall_interrupted", recall_id=str(pk), action=action)
    return done


def end_claim_of_dead_turn(session_id: str, turn_started_at: datetime) -> bool:
    """A turn of ``session_id`` was closed because its process died (``sessions_app`` recovery). If a
    recall of that session was claimed before the turn started, the dead turn was its run: end the
    occurrence now as interrupted (not when its lease runs out), and tell the clients
    (``recall_update`` then ``session_sync``). True when it did."""
    firing = (Recall.objects.filter(session_id=session_id, status=Recall.Status.FIRING)
              .values_list("pk", "claim_token").first())
    if firing is None:
        return False
    pk, token = firing
    if not RecallRun.objects.filter(claim_token=token, started_at__lte=turn_started_at,
                                    finished_at__isnull=True).exists():
        return False  # a newer claim whose own turn is alive (or not started): not this one's run
    action = finish_claim(recall_id=str(pk), token=token, run_id=None, outcome=RecallRun.Outcome.INTERRUPTED,
                          error=INTERRUPTED_ERROR)
    if action is None:
        return False
    notify.on_commit_session_sync(str(session_id))
    log.warning("recall_interrupted_with_its_turn", recall_id=str(pk), action=action)
    return True


def dispatch_due(*, now: datetime | None = None, grace: float | None = None) -> list[str]:
    """Send fire tasks for due pending recalls whose own task is late (lost in a restart, broker
    flush, beyond the ETA horizon, or it found every slot taken), at most as many as there are
    free run slots. ``grace`` (default RECALL_SWEEP_GRACE_SECONDS): how overdue a recall must be."""
    now = now or timezone.now()
    free = _setting("RECALL_MAX_CONCURRENT", 3) - running_count(now=now)
    if free <= 0:
        return []
    if grace is None:
        grace = float(getattr(settings, "RECALL_SWEEP_GRACE_SECONDS", 2))
    overdue_by = timedelta(seconds=grace)
    due = list(Recall.objects.filter(status=Recall.Status.PENDING, trigger_at__lte=now - overdue_by)
               .order_by("trigger_at").values_list("pk", "trigger_at")[:free])
    for pk, trigger_at in due:
        enqueue.fire_occurrence(str(pk), trigger_at)
    return [str(pk) for pk, _ in due]


def sweep(*, now: datetime | None = None) -> dict[str, Any]:
    """The beat safety net: recover dead claims, then dispatch overdue recalls."""
    interrupted = recover_expired_claims(now=now)
    dispatched = dispatch_due(now=now)
    return {"interrupted": interrupted, "dispatched": dispatched}


def fire_deferred_after_turn(session_id: str) -> None:
    """A recall deferred because its session was busy fires as soon as the turn ends,
    instead of waiting out RECALL_DEFER_SECONDS (e.g. an immediate recall scheduled in a turn)."""
    now = timezone.now()
    recall = Recall.objects.filter(session_id=session_id, status=Recall.Status.PENDING, trigger_at__gt=now).first()
    if recall is None:
        return
    last = recall.runs.order_by("-started_at").first()
    if last is None or last.outcome != RecallRun.Outcome.DEFERRED or last.started_at < now - timedelta(
            seconds=_setting("RECALL_DEFER_SECONDS", 60)):
        return
    due = now.replace(microsecond=0)
    if Recall.objects.filter(pk=recall.pk, status=Recall.Status.PENDING, trigger_at=recall.trigger_at).update(
            trigger_at=due, updated_at=now):
        recall.trigger_at = due
        log.info("recall_deferred_fires_after_turn", recall_id=str(recall.pk))
        notify.on_commit_enqueue(recall)


def fire_now(recall_id: str, *, worker: str) -> dict[str, Any]:
    """``manage.py fire_recall``: fire a pending recall now, through the normal claim. Returns
    {"result", "status", "trigger_at"}. Raises NotFound, or BadRequest when it is not pending."""
    from navi_site.errors import BadRequest, NotFound

    recall = Recall.objects.filter(pk=recall_id).first()
    if recall is None:
        raise NotFound(f"Recall {recall_id} not found.")
    if recall.status != Recall.Status.PENDING:
        raise BadRequest(f"Recall {recall.id} is {recall.status}, not pending: nothing to fire.")
    result = fire_recall(str(recall.id), worker=worker, force=True)
    recall.refresh_from_db()
    return {"result": result, "status": recall.status, "trigger_at": recall.trigger_at.isoformat()}
