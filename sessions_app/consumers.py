"""WebSocket ws/sessions/{id}: a thin consumer.

It authenticates, checks the session belongs to the user, joins the session's group,
replays the running turn (or sends session_sync), forwards events, and hands inbound
frames to the run registry. Turns run in the registry, never in this consumer: closing
the socket does not stop them, and a stop frame is read while a turn runs.

Replay without gap or duplicate: the consumer joins the group *before* reading the
log. Channels dispatches a consumer's messages one at a time, so events published
while ``on_joined`` reads the log wait in the channel's queue and are handled after
it; every event carries ``seq`` and anything at or below the last one sent is dropped.

Live delivery does not trust the channel layer either: Redis pub/sub drops what is
published while a subscriber (re)connects — including the moment between ``group_add``
sending SUBSCRIBE and Redis acting on it — and the in-memory layer drops messages for a
full channel. Every turn event is in the run's log before it is published, so:

* a live event whose seq skips ahead (> last sent + 1) is preceded by the missing
  events, read from the log's tail (in order; still deduplicated by seq);
* while a turn is open (seen running, its ``session_sync`` not yet sent) and nothing
  arrived for TAIL_CHECK_S, the consumer reads the tail: a turn whose *last* events
  were lost still ends on every client, and a run that died without ``session_sync``
  ends with one (the client reloads from REST);
* a gap the log cannot fill any more (an older turn's log was replaced) becomes a
  ``session_sync`` before the events that follow, so the client reloads what it missed.

These reads happen in the consumer's serial dispatch (a tail check is an internal
message), so replay, fill and live events can never interleave out of order.
"""
from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import structlog
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings

from agent.events import SteerQueued, SteerWithdrawn
from navi_site.errors import NaviError, NotFound
from sessions_app import eventjson, presence
from sessions_app.bus import group_name
from sessions_app.frames import (
    FrameError,
    MessageFrame,
    OtherFrame,
    SteerWithdrawFrame,
    StopFrame,
    TokenBucket,
    parse_frame,
)

log = structlog.get_logger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403
CLOSE_NOT_FOUND = 4004
RATE_LIMIT_MESSAGE = "Too many frames: slow down (at most 20 per second). Frames over the limit are ignored."
TAIL_CHECK_S = 2.0  # an open turn that sent nothing for this long: read the log's tail (lost events)


@database_sync_to_async
def _access(user: Any, session_id: str) -> Any:
    from sessions_app.services import session_access

    if user is None or not user.is_authenticated or not user.is_active:
        return None
    try:
        return session_access(user=user, session_id=session_id)
    except NotFound:
        return False


@database_sync_to_async
def _resolve_files(session_id: str, refs: list[Any]) -> list[dict[str, Any]]:
    from sessions_app.files import files_resolve

    return files_resolve(session_id=session_id, refs=refs)


async def _publish(session_id: str, event: Any) -> None:
    """A steering event to every client of the session (not in the run's log: GET /sessions/{id}
    lists what is queued for a client that connects later)."""
    from sessions_app.bus import apublish

    await apublish(session_id, event.to_dict())


def _encode(content: Any) -> str:
    """A frame's text: compact JSON, non-ASCII as is (``eventjson``)."""
    return eventjson.dumps(content).decode()


def _after(scope: dict[str, Any]) -> int | None:
    raw = parse_qs(scope.get("query_string", b"").decode("latin1")).get("after", [""])[0]
    try:
        return max(0, int(raw)) if raw else None
    except ValueError:
        return None


class DispatchState:
    """``in_hand``: messages received from a source and not yet dispatched (a direct delivery
    must wait for them: an asyncio lock reads as free between its release and the next
    waiter's resumption, so the lock alone does not say that a message is on its way)."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.in_hand = 0


async def dispatch_serially(sources: list[Callable[[], Awaitable[dict[str, Any]]]],
                            dispatch: Callable[[dict[str, Any]], Awaitable[None]],
                            state: DispatchState | None = None) -> None:
    """Channels' ``await_many_dispatch`` without a task per message.

    The stock loop starts a new task for every message it receives and waits on all of them
    with ``asyncio.wait`` — with 100 sessions streaming that was 5 000 task starts and waits a
    second on the server's loop. Here each source (the client's socket, the channel layer) has
    one long-lived receiver; a lock keeps dispatch serial across both, as before: one message
    at a time, each source's messages in order, and the next message of a source is not read
    until its previous one was handled. Ends on StopConsumer or the first error (re-raised).
    ``state`` counts the messages in hand (the consumer's direct delivery checks it).
    """
    state = state or DispatchState()
    lock = state.lock
    closed = False

    async def receive_from(source: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        nonlocal closed
        while not closed:
            message = await source()
            state.in_hand += 1
            try:
                async with lock:
                    if closed:
                        return
                    try:
                        await dispatch(message)
                    except BaseException:
                        closed = True
                        raise
            finally:
                state.in_hand -= 1
            # A queued message is returned without suspending: yield once per message so that a
            # consumer with a backlog does not hold the loop (other sockets, HTTP) until it is empty.
            await asyncio.sleep(0)

    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(receive_from(source)) for source in sources]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # StopConsumer or the error
    finally:
        closed = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class SessionConsumer(AsyncJsonWebsocketConsumer):
    session_id: str = ""
    group: str = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # AsyncConsumer.__call__ with dispatch_serially instead of await_many_dispatch.
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        # Internal messages (tail checks) go through the same serial dispatch as the others.
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        sources = [receive, self.inbox.get]
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
            sources.append(self.channel_receive)
        self.base_send = send
        self.dispatching = DispatchState()
        self.loop = asyncio.get_running_loop()
        try:
            await dispatch_serially(sources, self.dispatch, self.dispatching)
        except StopConsumer:
            pass
        finally:
            self._detach()

    async def connect(self) -> None:
        # Close codes can only be sent on an accepted socket: accept, then close.
        error = self.scope.get("navi_auth_error")
        if not error:
            session = await _access(self.scope.get("user"), self.scope["url_route"]["kwargs"]["session_id"])
            error = CLOSE_UNAUTHORIZED if session is None else CLOSE_NOT_FOUND if session is False else None
        if error:
            await self.accept()
            await self.close(code=error)
            return
        self.session_id = str(session.id)
        self.group = group_name(session.id)
        user = self.scope["user"]
        self.user_id: int = user.pk
        self.user_role = "staff" if user.is_staff else "user"
        self.last_seq = 0
        self.last_sent = self.last_event_at = time.monotonic()
        self.turn_open = False  # a turn was seen running and its session_sync not yet sent
        self.tail_task: asyncio.Task[None] | None = None
        self.tail_check_queued = False
        self.bucket = TokenBucket()
        self.log = log.bind(session_id=self.session_id, user_id=self.user_id)
        # Join before accepting, so no event published after the handshake is missed.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self.visible = True  # until the page says otherwise (a script's socket counts as watching)
        await self._presence()
        await self.on_joined()
        # After the replay or session_sync: a slow log read must not put a heartbeat first.
        self.heartbeat = asyncio.get_running_loop().create_task(self._heartbeat())
        attach = getattr(self.channel_layer, "attach", None)
        if attach is not None and self.scope.get("navi.server_send_now") is not None:
            attach(self.channel_name, self._deliver_now)

    async def on_joined(self) -> None:
        """Replay the running turn (events with seq > ?after), or session_sync when idle."""
        from sessions_app.runs import get_run_registry

        after = _after(self.scope)
        snap = await get_run_registry().snapshot(self.session_id)
        # The log and the counter are written together, so with an empty log the counter is where
        # the next event starts: a later seq jump then means a lost event, never a new client.
        latest = snap.events[-1]["seq"] if snap.events else snap.last_seq
        if snap.active:
            if after is None or after > latest:
                after = 0  # a fresh client, or a seq from before the counter restarted: whole turn
            self.last_seq = after
            for event in snap.events:
                await self._forward(event)
            self.last_seq = max(self.last_seq, latest)
            self._set_turn_open(not snap.events or snap.events[-1].get("type") != "session_sync")
            return
        # Idle: the tail of the last turn for ?after=N, then session_sync (reload from REST).
        events = [e for e in snap.events if e["seq"] > after] if after is not None else []
        for event in events:
            await self._forward(event)
        self.last_seq = max(self.last_seq, latest)
        self._set_turn_open(False)
        if not events or events[-1].get("type") != "session_sync":
            await self.send_json({"type": "session_sync"})

    def _deliver_now(self, message: dict[str, Any]) -> bool:
        """A live event sent from the publisher's step (in-memory layer, ``attach``); False
        leaves it to the queue: while a message is being dispatched (a replay, a gap fill, a
        client's frame), when an internal message waits, when the event is not the next one, and
        from any other thread or loop than this consumer's (daphne's socket is not thread-safe)."""
        if message.get("type") != "session.event" or self.dispatching.in_hand or not self.inbox.empty():
            return False
        try:
            if asyncio.get_running_loop() is not self.loop:
                return False
        except RuntimeError:
            return False
        event = message["event"]
        seq = event.get("seq")
        if isinstance(seq, int) and seq != self.last_seq + 1:
            return seq <= self.last_seq  # already sent; a gap is filled from the log by the queued path
        try:
            self.scope["navi.server_send_now"]({"type": "websocket.send", "text": _encode(event)})
        except Exception:  # this socket failed (closing): the queued path meets it as before
            self._detach()
            self.log.info("ws_direct_send_failed", seq=seq, error=repr(sys.exc_info()[1]))
            return False
        self.last_sent = time.monotonic()
        if isinstance(seq, int):
            self.last_seq = seq
            self.last_event_at = self.last_sent
            self._set_turn_open(event.get("type") != "session_sync")
        return True

    def _detach(self) -> None:
        detach = getattr(self.channel_layer, "detach", None)
        if detach is not None and getattr(self, "channel_name", None):
            detach(self.channel_name)

    async def disconnect(self, code: int) -> None:
        self._detach()
        for task in (getattr(self, "heartbeat", None), getattr(self, "tail_task", None)):
            if task is not None:
                task.cancel()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            try:
                await presence.aleave(self.session_id, self.channel_name)
            except Exception:  # noqa: BLE001 - the entry expires on its own
                self.log.warning("ws_presence_failed", exc_info=True)

    async def _presence(self) -> None:
        """Tell ``sessions_app.presence`` this client watches (and whether its page is visible)."""
        self.presence_at = time.monotonic()
        try:
            await presence.aset(self.session_id, self.channel_name, visible=self.visible)
        except Exception:  # noqa: BLE001 - presence only decides whether to notify
            self.log.warning("ws_presence_failed", exc_info=True)

    # -- outbound --------------------------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels runs close_old_connections() through sync_to_async before *every* handler:
        # a hop to the one thread-sensitive worker thread per streamed event, queued behind
        # every Django view (GET /sessions waited seconds with 100 sessions streaming).
        # Outbound events never touch the database, so they skip it; other messages do not.
        kind = message.get("type")
        if kind == "session.event":
            await self.session_event(message)
            return
        if kind == "session.tail_check":
            await self.session_tail_check(message)
            return
        await super().dispatch(message)

    async def session_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        seq = event.get("seq")
        if isinstance(seq, int) and self.session_id and seq > self.last_seq + 1:
            await self._fill(before=seq)  # the layer lost events: send them from the log first
        await self._forward(event)

    async def session_tail_check(self, message: dict[str, Any]) -> None:
        self.tail_check_queued = False
        if self.turn_open:
            await self._fill(before=None)

    async def _fill(self, *, before: int | None) -> None:
        """Send the logged events after the last one sent (below ``before``, a live event's seq).

        Without ``before`` (a tail check) it also settles whether the turn is over: a run that is
        no longer active and whose session_sync never came (it died) ends with one here."""
        from sessions_app.runs import get_run_registry

        tail = await get_run_registry().tail(self.session_id, self.last_seq)
        events = [e for e in tail.events if before is None or e["seq"] < before]
        upcoming = events[0]["seq"] if events else before if before is not None else tail.last_seq + 1
        resync = upcoming > self.last_seq + 1
        if resync:  # gone from the log too (an older turn's log was replaced): reload from REST
            self.log.warning("ws_events_unrecoverable", after=self.last_seq, upcoming=upcoming)
            await self.send_json({"type": "session_sync"})
        elif events:
            self.log.info("ws_events_filled", after=self.last_seq, count=len(events), live=before is not None)
        for event in events:
            await self._forward(event)
        if before is None and self.turn_open and not tail.active:
            self._set_turn_open(False)
            if not resync:
                self.log.warning("ws_turn_ended_without_session_sync", last_seq=self.last_seq)
                await self.send_json({"type": "session_sync"})

    async def _forward(self, event: dict[str, Any]) -> None:
        seq = event.get("seq")
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return  # already sent (replay/live overlap)
            self.last_seq = seq
            self.last_event_at = time.monotonic()
            self._set_turn_open(event.get("type") != "session_sync")
        await self.send_json(event)

    def _set_turn_open(self, value: bool) -> None:
        self.turn_open = value
        if value and self.tail_task is None:
            self.tail_task = asyncio.get_running_loop().create_task(self._watch_tail())

    async def _watch_tail(self) -> None:
        """While a turn is open, queue a tail check after every TAIL_CHECK_S without an event."""
        try:
            while self.turn_open:
                wait = self.last_event_at + TAIL_CHECK_S - time.monotonic()
                if wait <= 0:
                    if not self.tail_check_queued:
                        self.tail_check_queued = True
                        self.inbox.put_nowait({"type": "session.tail_check"})
                    wait = TAIL_CHECK_S
                await asyncio.sleep(wait)
        finally:
            self.tail_task = None

    async def send_json(self, content: Any, close: bool = False) -> None:
        self.last_sent = time.monotonic()
        # A frame goes straight to the server (navi_site.ws_auth.ServerSend): Channels' session
        # wrapper around send only matters for HTTP responses, and streamed events are thousands
        # of frames a second. A close still goes through the stack.
        server_send = self.scope.get("navi.server_send")
        if server_send is None or close:
            await super().send_json(content, close)
            return
        await server_send({"type": "websocket.send", "text": _encode(content)})

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return _encode(content)

    async def _heartbeat(self) -> None:
        interval = float(settings.WS_HEARTBEAT_SECONDS)
        while True:
            if time.monotonic() - self.presence_at >= presence.REFRESH_S:
                await self._presence()
            wait = min(self.last_sent + interval, self.presence_at + presence.REFRESH_S) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if time.monotonic() < self.last_sent + interval:
                continue
            try:
                await self.send_json({"type": "heartbeat"})
            except Exception:  # the socket is gone; disconnect() cancels this task
                return

    async def _error(self, message: str) -> None:
        await self.send_json({"type": "error", "message": message})

    # -- inbound ---------------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if not self.session_id:
            return
        if not self.bucket.take():
            if not self.bucket.limited:
                self.bucket.limited = True
                await self._error(RATE_LIMIT_MESSAGE)
            return
        max_bytes = int(float(settings.WS_MAX_MESSAGE_MB) * 1024 * 1024)
        from sessions_app.hooks import frame_types

        try:
            frame = parse_frame(text_data, bytes_data, max_bytes=max_bytes, other_types=frame_types())
        except FrameError as exc:
            await self._error(exc.message)
            return
        if isinstance(frame, MessageFrame):
            await self._message(frame)
        elif isinstance(frame, StopFrame):
            await self._stop()
        elif isinstance(frame, SteerWithdrawFrame):
            await self._withdraw(frame)
        elif isinstance(frame, OtherFrame):
            await self._other(frame)
        elif frame.visible != self.visible:
            self.visible = frame.visible
            await self._presence()

    async def _message(self, frame: MessageFrame) -> None:
        """Start a turn; while one runs, queue the message for its next step instead (steering).

        The queue is tied to the run holding the session's lock, atomically: when the turn ended
        meanwhile the message starts a turn of its own, and when a turn started meanwhile it is
        queued for that one. A message with attachments cannot join a running turn."""
        from sessions_app.runs import SessionBusy, SteerRefused, TurnRequest, get_run_registry

        registry = get_run_registry()
        files: list[dict[str, Any]] = []
        for _ in range(3):
            if await registry.ais_busy(self.session_id):
                if frame.images or frame.files:
                    await self._error("Images and files cannot be added to a running turn: wait for it to "
                                      "finish (or press Stop), then send them.")
                    return
                try:
                    item = await registry.steer(self.session_id, content=frame.content, user_id=self.user_id,
                                                ref=frame.ref)
                except SteerRefused as exc:
                    await self._error(exc.message)
                    return
                if item is not None:
                    await _publish(self.session_id, SteerQueued(id=item.id, content=item.content, ref=item.ref))
                    self.log.info("steer_queued", steer_id=item.id)
                    return
            if frame.files and not files:
                try:
                    files = await _resolve_files(self.session_id, frame.file_refs())
                except NotFound as exc:
                    await self._error(exc.message)
                    return
            request = TurnRequest(session_id=self.session_id, text=frame.content, user_id=self.user_id,
                                  user_role=self.user_role, images=tuple(frame.images), files=tuple(files))
            try:
                run = await registry.start_turn(request)  # returns at once: the turn is the registry's task
            except SessionBusy:
                continue  # a turn started meanwhile: queue for it
            self.log.info("turn_started", run_id=run.run_id)
            return
        await self._error(SessionBusy().message)

    async def _withdraw(self, frame: SteerWithdrawFrame) -> None:
        from sessions_app.runs import get_run_registry
        from sessions_app.runs.steering import STEER_GONE

        item = await get_run_registry().withdraw_steer(self.session_id, frame.id)
        if item is None:
            await self.send_json({"type": "error", "message": STEER_GONE, "frame": "steer_withdraw", "ref": frame.id})
            return
        await _publish(self.session_id, SteerWithdrawn(id=item.id))

    async def _other(self, frame: OtherFrame) -> None:
        """A frame another app handles (an approval decision): quick work only, dispatch is serial.
        Its errors answer this client alone, with the frame's type and ``ref`` to match them up."""
        from sessions_app.hooks import frame_handler

        handler = frame_handler(frame.type)
        if handler is None:
            return
        try:
            await handler(frame.payload, user=self.scope["user"], session_id=self.session_id)
        except NaviError as exc:
            ref = frame.payload.get("ref")
            await self.send_json({"type": "error", "message": exc.message, "frame": frame.type,
                                  **({"ref": str(ref)[:100]} if ref is not None else {})})

    async def _stop(self) -> None:
        from sessions_app.runs import arequest_stop

        stopped = await arequest_stop(self.session_id)
        self.log.info("stop_requested", stopped=stopped)
