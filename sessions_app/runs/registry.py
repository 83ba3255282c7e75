"""The run registry: one active turn per session, owned by the registry, not by a connection.

A turn is an asyncio task. Its events are numbered (``seq``, per session and monotonic
across turns, so ``?after=N`` works whatever turn N belonged to), appended to the
session's replay log and fanned out to the session's channel-layer group. The registry
emits ``stream_start`` before the agent's first event and ``session_sync`` after the
last. Stop is cooperative: ``request_stop`` sets the run's stop event (directly when the
run is in this process, through the store's stop key otherwise); never ``task.cancel()``.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from django.conf import settings

from agent.events import Error, SessionSync, SteerDropped, StreamStart
from sessions_app.runs import drafts
from sessions_app.runs.steering import Inbox, SteerItem, inbox_for, new_item
from sessions_app.runs.store import LOCK_REFRESH_S, STOP_POLL_S, LocalStore, RedisStore, RunStore, Snapshot
from sessions_app.runs.writer import EventWriter

log = structlog.get_logger(__name__)

BUSY_MESSAGE = "a turn is already running in this session — wait for it to finish or press Stop"

# run_stream(session_id, text, *, images, files, is_recall, stop_event, user_id, user_role)
TurnFn = Callable[..., AsyncIterator[Any]]


MAX_QUEUED_MESSAGE = "Too many messages are waiting for this turn already."


class SteerRefused(Exception):
    """A message could not be queued for the running turn (its queue is full)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionBusy(Exception):
    """A turn is already running in this session."""

    def __init__(self) -> None:
        super().__init__(BUSY_MESSAGE)
        self.message = BUSY_MESSAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    session_id: str
    text: str
    user_id: int | None
    user_role: str = "user"
    images: Sequence[str] = ()
    files: Sequence[dict[str, Any]] = ()
    is_recall: bool = False
    planning: bool = True  # REST POST /messages is the spec's non-streaming run(): no planning phase
    # Awaited once the session's lock is held, before the agent starts (regenerate archives the old
    # answer there); an exception ends the turn with an error event.
    before: Callable[[], Awaitable[None]] | None = field(default=None, compare=False)
    # Awaited when the turn has ended and its messages are saved, before the final session_sync
    # (a recall records its outcome there, so recall_update "fired" precedes session_sync: spec 004).
    on_end: Callable[[TurnResult], Awaitable[None]] | None = field(default=None, compare=False)
    # An unattended run's own rules (agent.gate.RunRules: a recall's), and untrusted content the
    # turn starts with (a message from a messaging channel): both reach the policy point.
    rules: Any = None
    tainted_by: tuple[str, ...] = ()
    # Stored on the turn's user message (an edited or regenerated exchange's ``branch_group``).
    user_metadata: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """How a turn ended: ``outcome`` is "success", "max_iterations", "stopped", "time_limit" (an
    unattended run's ``max_seconds`` of work were used up) or "error: <message>"."""

    outcome: str
    content: str = ""
    stopped: bool = False
    error: str | None = None
    first_turn_succeeded: bool = False


@dataclass(eq=False)
class Run:
    request: TurnRequest
    run_id: str
    stop_event: asyncio.Event
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[TurnResult]
    task: asyncio.Task[None] | None = None
    started_at: float = field(default_factory=time.monotonic)
    # Time spent waiting for approvals does not count as work (an unattended run's max_seconds).
    waiting: int = 0
    waiting_since: float = 0.0
    parked_s: float = 0.0
    time_limited: bool = False
    ending: bool = False  # the turn is over: its watcher polls no more (``RunRegistry._watch``)

    def note(self, kind: Any) -> None:
        """Follow the approvals the run waits for, from its events."""
        if kind == "approval_required":
            if self.waiting == 0:
                self.waiting_since = time.monotonic()
            self.waiting += 1
        elif kind == "approval_resolved" and self.waiting:
            self.waiting -= 1
            if self.waiting == 0:
                self.parked_s += time.monotonic() - self.waiting_since

    def worked_s(self) -> float:
        """Seconds of work so far: the run's age minus the time it waited for approvals."""
        now = time.monotonic()
        parked = self.parked_s + (now - self.waiting_since if self.waiting else 0.0)
        return now - self.started_at - parked

    def check_time_limit(self) -> None:
        limit = getattr(self.request.rules, "max_seconds", None)
        if limit and not self.stop_event.is_set() and self.worked_s() > float(limit):
            self.time_limited = True
            self.stop_event.set()

    def stop(self) -> None:
        """Thread-safe: asyncio.Event is not, so the set happens on the run's loop."""
        if self.loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.stop_event.set()
        else:
            self.loop.call_soon_threadsafe(self.stop_event.set)


def _default_turn() -> TurnFn:
    from agent.loop import get_agent

    return get_agent().run_stream  # type: ignore[no-any-return]


class RunRegistry:
    def __init__(self, store: RunStore | None = None, turn: TurnFn | None = None) -> None:
        self.store: RunStore = store or _default_store()
        self._turn = turn
        self.runs: dict[str, Run] = {}  # runs executing in this process
        self.inbox: Inbox = inbox_for(self.store)  # messages sent while a turn runs (steering.py)

    @property
    def turn(self) -> TurnFn:
        return self._turn or _default_turn()

    @turn.setter
    def turn(self, fn: TurnFn | None) -> None:
        self._turn = fn

    # -- queries -------------------------------------------------------------------------

    async def ais_busy(self, session_id: str) -> bool:
        return str(session_id) in self.runs or await self.store.busy(str(session_id))

    def is_busy(self, session_id: str) -> bool:
        return str(session_id) in self.runs or self.store.busy_sync(str(session_id))

    def busy_many(self, session_ids: list[str]) -> set[str]:
        return {s for s in session_ids if s in self.runs} | self.store.busy_many_sync(session_ids)

    async def snapshot(self, session_id: str) -> Snapshot:
        return await self.store.snapshot(str(session_id))

    async def tail(self, session_id: str, after: int) -> Snapshot:
        """The logged events with seq > ``after`` (what a client missed), and is a run active."""
        return await self.store.tail(str(session_id), after)

    # -- commands ------------------------------------------------------------------------

    async def start_turn(self, request: TurnRequest) -> Run:
        """Start a turn as a registry-owned task and return at once. Raises SessionBusy."""
        sid = request.session_id
        run_id = uuid.uuid4().hex[:16]
        if sid in self.runs or not await self.store.acquire(sid, run_id):
            raise SessionBusy()
        loop = asyncio.get_running_loop()
        run = Run(request=request, run_id=run_id, stop_event=asyncio.Event(), loop=loop, done=loop.create_future())
        self.runs[sid] = run
        run.task = loop.create_task(self._execute(run), name=f"navi-run-{sid[:8]}-{run_id}")
        return run

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        """Start a turn and wait for its end (REST /messages, recalls). Raises SessionBusy.

        Returns once the run's task is over, its end-of-turn work included (the title, the
        turn-ended hooks), not merely when its result is known: a caller whose event loop ends
        when this returns (``async_to_sync`` in a scale-out Celery worker, ``asyncio.run`` in a
        plain thread) would otherwise cut that work off mid-way ("CurrentThreadExecutor already
        quit"), and, say, an approval the run left pending would never be cancelled."""
        run = await self.start_turn(request)
        result = await asyncio.shield(run.done)
        if run.task is not None:
            await asyncio.shield(run.task)  # _execute never raises: its end-of-turn steps are _safe
        return result

    async def arequest_stop(self, session_id: str) -> bool:
        """Ask the session's run to stop, wherever it runs. True when a run was active."""
        sid = str(session_id)
        run = self.runs.get(sid)
        if run is not None:
            run.stop()
        remote = await self.store.request_stop(sid)
        return run is not None or remote

    def request_stop(self, session_id: str) -> bool:
        """Sync variant (any thread)."""
        sid = str(session_id)
        run = self.runs.get(sid)
        if run is not None:
            run.stop()
        remote = self.store.request_stop_sync(sid)
        return run is not None or remote

    async def steer(self, session_id: str, *, content: str, user_id: int | None,
                    ref: str | None = None) -> SteerItem | None:
        """Queue a message for the session's running turn, wherever it runs; it is read at the turn's
        next step. None when no turn runs (the caller starts one). Raises SteerRefused (a full queue)."""
        status, item = await self.inbox.push(str(session_id), new_item(content=content, user_id=user_id, ref=ref))
        if status == "full":
            raise SteerRefused(f"{MAX_QUEUED_MESSAGE} Withdraw one, or wait for the turn to read them.")
        return item

    async def withdraw_steer(self, session_id: str, steer_id: str) -> SteerItem | None:
        """Take back a queued message before the turn reads it; None when it is no longer queued."""
        return await self.inbox.withdraw(str(session_id), str(steer_id))

    def pending_steers(self, session_id: str) -> list[SteerItem]:
        """The messages queued for the session's running turn (any thread)."""
        return self.inbox.pending_sync(str(session_id))

    async def wait_idle(self, session_id: str, within: float) -> bool:
        """Wait until no run is active in the session (True) or ``within`` seconds pass (False)."""
        deadline = time.monotonic() + within
        while await self.ais_busy(session_id):
            if time.monotonic() > deadline:
                return False
            run = self.runs.get(str(session_id))
            if run is not None and run.loop is asyncio.get_running_loop():
                await asyncio.wait({run.done}, timeout=min(0.5, max(0.0, deadline - time.monotonic())))
            else:  # in another process, or on another loop of this one (HTTP has its own)
                await asyncio.sleep(0.05)
        return True

    # -- the run -------------------------------------------------------------------------

    async def _execute(self, run: Run) -> None:
        req = run.request
        sid = req.session_id
        rlog = log.bind(session_id=sid, run_id=run.run_id)
        result = TurnResult(outcome="error: the turn ended without a result")
        watcher = asyncio.get_running_loop().create_task(self._watch(run))
        writer: EventWriter | None = None
        draft = drafts.register(sid, run.run_id)
        try:
            first_seq = await self.store.begin_log(sid)
            writer = EventWriter(self.store, sid, run.run_id, coalesce_ms=settings.WS_DELTA_COALESCE_MS,
                                 first_seq=first_seq)
            await writer.push(StreamStart().to_dict())
            refused = await _before(req.before) if req.before is not None else None
            if refused is not None:  # nothing ran, nothing was saved
                result = TurnResult(outcome=f"error: {refused}", error=refused)
                await writer.push(Error(message=refused).to_dict())
            else:
                result = await self._pump(run, writer, draft)
            if run.time_limited and result.outcome == "stopped":
                limit = float(run.request.rules.max_seconds)
                result = TurnResult(outcome="time_limit", content=result.content, stopped=True,
                                    error=f"the run's time limit ({limit:g} s of work) was reached")
        except Exception as exc:  # a bug in the loop or the transport: tell the clients, log it
            rlog.exception("run_failed")
            message = f"The turn failed unexpectedly ({type(exc).__name__}: {exc}). Try again; see the server log."
            result = TurnResult(outcome=f"error: {message}", error=message)
            draft.error = draft.error or message
            if writer is not None:
                await _safe(writer.push(Error(message=message).to_dict()))
        finally:
            run.ending = True
            watcher.cancel()
            await drafts.finish(draft)  # the partial answer and an error stay in the history
            await _safe(self._drop_queued(run, writer, result))
            if req.on_end is not None:
                await _safe(req.on_end(result))
            if writer is not None:
                await _safe(writer.flush())
                await _safe(writer.push(SessionSync().to_dict()))
            self.runs.pop(sid, None)
            await _stopped(watcher)  # before the release: a poll after it would take the lock back (_watch)
            await _safe(self.store.release(sid, run.run_id))
            rlog.info("run_finished", outcome=result.outcome, seconds=round(time.monotonic() - run.started_at, 2))
            if not run.done.done():
                run.done.set_result(result)
        if result.first_turn_succeeded:
            await _safe(_after_first_turn(sid))
        await _safe(_turn_finished(run, result))

    async def _drop_queued(self, run: Run, writer: EventWriter | None, result: TurnResult) -> None:
        """Close the run's inbox; messages the turn did not read go back to the clients."""
        left = await self.inbox.close(run.request.session_id, run.run_id)
        if not left or writer is None:
            return
        reason: Literal["stopped", "error", "ended"] = "stopped" if result.stopped else "error" if result.error else "ended"
        log.info("steer_dropped", session_id=run.request.session_id, run_id=run.run_id, count=len(left), reason=reason)
        await writer.push(SteerDropped(items=[i.public() for i in left], reason=reason).to_dict())

    async def _pump(self, run: Run, writer: EventWriter, draft: drafts.Draft) -> TurnResult:
        """Feed the agent's events to the writer, in this task.

        A pending delta must go out when its window closes even while the agent waits for the
        model: the timer flushes it (embedded mode: right in the callback; otherwise, or while
        an event is being written, a short task that takes the lock). The writer is used under a lock, so
        the flush and the next event never interleave (in scale-out mode writing awaits Redis).
        (The agent used to run in a task of its own feeding a queue: a queue hand-off and a task
        switch for every token, ~7 % of the loop with 100 sessions streaming.)"""
        req = run.request
        loop = asyncio.get_running_loop()
        lock = asyncio.Lock()
        tracker = _OutcomeTracker()
        timer: asyncio.TimerHandle | None = None
        timer_at: float | None = None
        flushes: set[asyncio.Task[None]] = set()
        closed = False

        def arm() -> None:
            nonlocal timer, timer_at
            deadline = writer.deadline
            if closed or deadline == timer_at:
                return
            if timer is not None:
                timer.cancel()
            timer_at = deadline
            timer = None if deadline is None else loop.call_at(
                loop.time() + max(0.0, deadline - time.monotonic()), on_timer)

        def on_timer() -> None:
            nonlocal timer, timer_at
            timer, timer_at = None, None
            if not lock.locked():  # embedded mode: close the window right here, no task
                try:
                    due = writer.deadline is not None and time.monotonic() >= writer.deadline
                    done = writer.flush_now() if due else True
                except Exception:
                    log.exception("run_flush_failed", session_id=req.session_id, run_id=run.run_id)
                    done = True
                if done:
                    arm()
                    return
            task = loop.create_task(flush_due())
            flushes.add(task)
            task.add_done_callback(flushes.discard)

        async def flush_due() -> None:
            async with lock:
                try:
                    if writer.deadline is not None and time.monotonic() >= writer.deadline:
                        await writer.flush()
                except Exception:  # the writer logs its own store/fan-out failures; this is a bug
                    log.exception("run_flush_failed", session_id=req.session_id, run_id=run.run_id)
                arm()

        extra: dict[str, Any] = {}
        if req.rules is not None:
            extra["rules"] = req.rules
        if req.tainted_by:
            extra["tainted_by"] = tuple(req.tainted_by)
        if req.user_metadata:
            extra["user_metadata"] = dict(req.user_metadata)
        stream = self.turn(
            req.session_id, req.text, images=tuple(req.images), files=tuple(req.files),
            is_recall=req.is_recall, stop_event=run.stop_event, user_id=req.user_id,
            user_role=req.user_role, run_id=run.run_id, planning=req.planning, **extra,
        )
        try:
            async for item in stream:
                data = item.to_dict() if hasattr(item, "to_dict") else dict(item)
                tracker.see(data, item)
                draft.see(data)
                run.note(data.get("type"))
                async with lock:
                    await writer.push(data)
                    arm()
        except BaseException:
            # The writer failed (or the task was cancelled): let the agent end cooperatively;
            # its remaining events are dropped (the caller reports the failure).
            run.stop_event.set()
            await _drain(stream)
            raise
        finally:
            closed = True
            if timer is not None:
                timer.cancel()
            if flushes:
                await asyncio.gather(*flushes, return_exceptions=True)
        await writer.flush()
        return tracker.result(await _is_first_turn(req.session_id) if tracker.succeeded else False)

    async def _watch(self, run: Run) -> None:
        """Keep the lock alive and poll for stop requests from other processes.

        Both take back a lock that vanished (``store._POLL``: Redis restarted empty), so a poll after
        the run released its lock would hold the session for a run that is over: the session would
        refuse every message as busy ("a turn is already running") and replay the ended turn to
        every client that connects, for LOCK_TTL_S. The watcher therefore stops at ``run.ending``,
        set before the release, which also waits for it (``_stopped``): cancelling it is not
        enough, as a cancel that lands while a Redis reply arrives can be lost (see ``_stopped``)."""
        sid = run.request.session_id
        last_refresh = time.monotonic()
        while not run.ending:
            await asyncio.sleep(STOP_POLL_S)
            if run.ending:
                return
            run.check_time_limit()
            try:
                if not run.stop_event.is_set() and await self.store.stop_requested(sid, run.run_id):
                    run.stop_event.set()
                if time.monotonic() - last_refresh >= LOCK_REFRESH_S:
                    await self.store.refresh(sid, run.run_id)
                    last_refresh = time.monotonic()
            except Exception:
                log.warning("run_watch_failed", session_id=sid, run_id=run.run_id, exc_info=True)


class _OutcomeTracker:
    """Derives the turn's outcome from its terminal event."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.content = ""
        self.error: str | None = None
        self.max_iterations = False
        self.streamed: list[str] = []

    def see(self, data: dict[str, Any], event: Any = None) -> None:
        kind = data.get("type")
        if kind == "stream_delta":
            self.streamed.append(str(data.get("delta") or ""))
        elif kind == "stream_end":
            self.kind, self.content = "stream_end", data.get("content") or ""
            self.max_iterations = getattr(event, "finish_reason", None) == "max_iterations"
        elif kind == "stream_stopped":
            self.kind = "stopped"
        elif kind == "error" and self.kind is None:
            self.kind, self.error = "error", str(data.get("message") or "error")

    @property
    def succeeded(self) -> bool:
        return self.kind == "stream_end"

    def result(self, first_turn: bool) -> TurnResult:
        if self.kind == "stream_end":
            outcome = "max_iterations" if self.max_iterations else "success"
            return TurnResult(outcome=outcome, content=self.content, first_turn_succeeded=first_turn)
        if self.kind == "stopped":
            return TurnResult(outcome="stopped", content="".join(self.streamed), stopped=True)
        message = self.error or "the turn ended without a final answer"
        return TurnResult(outcome=f"error: {message}", error=message)


async def _is_first_turn(session_id: str) -> bool:
    from sessions_app.runs import hooks

    return await hooks.is_first_turn(session_id)


async def _after_first_turn(session_id: str) -> None:
    from sessions_app.runs import hooks

    await hooks.schedule_title(session_id)


async def _turn_finished(run: Run, result: TurnResult) -> None:
    from channels.db import database_sync_to_async

    from sessions_app.hooks import TurnEnded, run_turn_finished_hooks

    req = run.request
    ended = TurnEnded(session_id=req.session_id, user_id=req.user_id, is_recall=req.is_recall,
                      outcome=result.outcome, content=result.content,
                      seconds=time.monotonic() - run.started_at, run_id=run.run_id)
    await database_sync_to_async(run_turn_finished_hooks)(req.session_id, ended)


async def _before(fn: Callable[[], Awaitable[None]]) -> str | None:
    """Run a request's ``before``; the message of what it raised, or None."""
    try:
        await fn()
    except Exception as exc:
        log.warning("run_before_refused", error=str(exc))
        return str(exc) or type(exc).__name__
    return None


async def _stopped(watcher: asyncio.Task[None]) -> None:
    """Until the run's watcher is over. The cancel is repeated: one can be lost, as Python 3.11's
    ``asyncio.wait_for`` (redis-py awaits replies through it) returns the result instead of raising
    when the reply came in before the cancelled wait resumed — most cancels that meet a command in
    flight. A poll is ~1 ms of the watcher's cycle, but a blocked loop (a long synchronous log write)
    makes the meeting likely. The watcher also ends by itself at ``run.ending``."""
    while not watcher.done():
        watcher.cancel()
        await asyncio.wait({watcher}, timeout=STOP_POLL_S)


async def _drain(stream: Any) -> None:
    """Run the agent's stream to its end, dropping its events (after a stop request)."""
    try:
        async for _ in stream:
            pass
    except Exception:
        log.warning("run_drain_failed", exc_info=True)


async def _safe(coro: Any) -> None:
    try:
        await coro
    except Exception:
        log.exception("run_cleanup_failed")


def _default_store() -> RunStore:
    url = getattr(settings, "REDIS_URL", "")
    return RedisStore(url) if url else LocalStore()
