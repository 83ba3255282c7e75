"""Where the run registry keeps its shared state: the busy lock, the seq counter, the replay
log and stop requests of every session.

``LocalStore`` (embedded mode): plain dicts, touched from the server's event loop; reads
from other threads (``is_busy`` in a Celery worker thread) are single dict lookups.

``RedisStore`` (scale-out): the same operations on Redis keys, so that any ASGI process
can replay a turn that runs in another process, and a stop request reaches the run
wherever it executes. Keys of session S (all with a TTL, so a crashed process leaves
nothing behind for long)::

    navi:run:S:lock  run_id of the active run  SET NX EX 30, refreshed every 10 s
    navi:run:S:seq   last seq given out        7 days (seq is per session, across turns)
    navi:run:S:log   JSON events of the current/last turn (RPUSH)   1 hour after the last event
    navi:run:S:stop  run_id a stop was requested for                60 s

Besides replay on connect, the log is what makes live delivery gap-proof: a consumer that
sees a seq jump, or expects more of a turn and hears nothing, reads the log's ``tail``
(the Redis pub/sub channel layer drops messages while a subscriber reconnects).
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessions_app import eventjson
from sessions_app.redis_batch import CommandBatcher

LOCK_TTL_S = 30
LOCK_REFRESH_S = 10.0
SEQ_TTL_S = 7 * 24 * 3600
LOG_TTL_S = 3600
STOP_TTL_S = 60
STOP_POLL_S = 0.2
MAX_CONNECTIONS = 64  # per event loop
HEALTH_CHECK_S = 5  # a pooled connection idle this long is checked before use (``RedisRunStore._client``)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a connecting client needs: is a run active, the log of the current/last turn (or
    its tail), and the last seq given out in the session (0 when unknown)."""

    active: bool
    events: list[dict[str, Any]]
    last_seq: int = 0


class RunStore(Protocol):
    async def acquire(self, session_id: str, run_id: str) -> bool: ...
    async def refresh(self, session_id: str, run_id: str) -> None: ...
    async def release(self, session_id: str, run_id: str) -> None: ...
    def release_sync(self, session_id: str, run_id: str) -> None: ...
    async def busy(self, session_id: str) -> bool: ...
    def busy_sync(self, session_id: str) -> bool: ...
    def busy_many_sync(self, session_ids: list[str]) -> set[str]: ...
    async def begin_log(self, session_id: str) -> int: ...
    async def append(self, session_id: str, seq: int, event: dict[str, Any]) -> None: ...
    async def snapshot(self, session_id: str) -> Snapshot: ...
    async def tail(self, session_id: str, after: int) -> Snapshot: ...
    async def request_stop(self, session_id: str) -> bool: ...
    def request_stop_sync(self, session_id: str) -> bool: ...
    async def stop_requested(self, session_id: str, run_id: str) -> bool: ...


# -- embedded -----------------------------------------------------------------------------


@dataclass
class _LocalSession:
    seq: int = 0
    lock: str | None = None
    log: list[dict[str, Any]] = field(default_factory=list)  # the running turn's events
    packed: bytes = b""  # or, once the run has ended, the same events as one JSON array
    log_expires: float = 0.0
    stop_for: str | None = None

    def events(self) -> list[dict[str, Any]]:
        """The log of the current or last turn (the running turn's own list: do not change it)."""
        log = self.log  # one read: pack() (release, perhaps on a worker thread) sets packed first, then log
        return log if log or not self.packed else eventjson.loads(self.packed)  # type: ignore[no-any-return]

    def pack(self) -> None:
        """A finished turn's log is kept for LOG_TTL_S for ``?after=N`` reconnects, but read
        rarely: as one JSON array it takes ~50 bytes an event instead of a dict and a string
        (~300 bytes). 100 finished turns of 1 000 tokens: ~13 MB less."""
        if self.log:
            self.packed, self.log = eventjson.dumps(self.log), []


class LocalStore:
    """In-process state (embedded mode). Not shared between processes, by design."""

    def __init__(self) -> None:
        self._sessions: dict[str, _LocalSession] = {}
        self._mutex = threading.Lock()  # acquire may be called from a worker thread's own loop

    def _get(self, session_id: str) -> _LocalSession:
        state = self._sessions.get(session_id)
        if state is None:
            state = self._sessions.setdefault(session_id, _LocalSession())
        return state

    async def acquire(self, session_id: str, run_id: str) -> bool:
        with self._mutex:
            state = self._get(session_id)
            if state.lock is not None:
                return False
            state.lock = run_id
            state.stop_for = None
            return True

    async def refresh(self, session_id: str, run_id: str) -> None:
        return None

    async def release(self, session_id: str, run_id: str) -> None:
        self.release_sync(session_id, run_id)

    def release_sync(self, session_id: str, run_id: str) -> None:
        """``release`` from sync code (a dead run's lock, after recovery)."""
        with self._mutex:
            state = self._get(session_id)
            if state.lock == run_id:
                state.lock = None
                state.log_expires = time.monotonic() + LOG_TTL_S
                state.pack()
            self._expire_logs()

    def _expire_logs(self) -> None:
        now = time.monotonic()
        for state in self._sessions.values():
            if state.lock is None and (state.log or state.packed) and state.log_expires < now:
                state.log, state.packed = [], b""

    def holder(self, session_id: str) -> str | None:
        """The run_id holding the session's lock (call under ``_mutex`` to act on it)."""
        state = self._sessions.get(session_id)
        return None if state is None else state.lock

    async def busy(self, session_id: str) -> bool:
        return self.busy_sync(session_id)

    def busy_sync(self, session_id: str) -> bool:
        state = self._sessions.get(session_id)
        return state is not None and state.lock is not None

    def busy_many_sync(self, session_ids: list[str]) -> set[str]:
        return {sid for sid in session_ids if self.busy_sync(sid)}

    async def begin_log(self, session_id: str) -> int:
        state = self._get(session_id)
        state.log, state.packed = [], b""
        return state.seq

    async def append(self, session_id: str, seq: int, event: dict[str, Any]) -> None:
        self.append_now(session_id, seq, event)

    def append_now(self, session_id: str, seq: int, event: dict[str, Any]) -> None:
        """``append`` without a coroutine (``EventWriter.flush_now``)."""
        state = self._get(session_id)
        state.seq = seq
        state.log.append(event)

    async def snapshot(self, session_id: str) -> Snapshot:
        state = self._sessions.get(session_id)
        if state is None:
            return Snapshot(active=False, events=[])
        return Snapshot(active=state.lock is not None, events=list(state.events()), last_seq=state.seq)

    async def tail(self, session_id: str, after: int) -> Snapshot:
        state = self._sessions.get(session_id)
        if state is None:
            return Snapshot(active=False, events=[])
        log = state.events()
        start = max(0, after - log[0]["seq"] + 1) if log else 0  # seqs in a log are consecutive
        return Snapshot(active=state.lock is not None, events=[e for e in log[start:] if e["seq"] > after],
                        last_seq=state.seq)

    async def request_stop(self, session_id: str) -> bool:
        return self.request_stop_sync(session_id)

    def request_stop_sync(self, session_id: str) -> bool:
        state = self._sessions.get(session_id)
        if state is None or state.lock is None:
            return False
        state.stop_for = state.lock
        return True

    async def stop_requested(self, session_id: str, run_id: str) -> bool:
        state = self._sessions.get(session_id)
        return state is not None and state.stop_for == run_id


# -- scale-out ----------------------------------------------------------------------------

# Renew the run's lock; a lock that vanished (Redis restarted, or lost its data) is taken back, so
# the session does not look idle to other processes while the run goes on.
_REFRESH = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
if not holder then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 2 end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# The stop poll (every STOP_POLL_S): the stop request for the run, if any; and, like _REFRESH, a lock
# that vanished is taken back at once, so after a Redis restart the session looks idle for at most
# one poll rather than until the next refresh (LOCK_REFRESH_S), and no second turn starts in it.
_POLL = """
if not redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
return redis.call('GET', KEYS[2])
"""
_STOP = """
local run = redis.call('GET', KEYS[1])
if not run then return 0 end
redis.call('SET', KEYS[2], run, 'EX', ARGV[1])
return 1
"""


# One event of a run: the seq counter, the log and its expiry, and (ARGV[5], ARGV[6]: channel and
# payload) the PUBLISH to the session's group, in one command. A script is atomic, so a reader never
# sees seq N before event N, and a subscriber never gets an event the log does not hold yet.
_APPEND = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
if ARGV[5] then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
return 1
"""


# The log's events after seq ARGV[1]: a turn's seqs are consecutive, so the first event's seq
# gives the index to start from (one round trip, whatever the length of the log).
_TAIL = """
local out = {redis.call('EXISTS', KEYS[1]), redis.call('GET', KEYS[3]) or '0'}
local first = redis.call('LINDEX', KEYS[2], 0)
if first then
  local start = tonumber(ARGV[1]) - cjson.decode(first)['seq'] + 1
  if start < 0 then start = 0 end
  for _, item in ipairs(redis.call('LRANGE', KEYS[2], start, -1)) do out[#out + 1] = item end
end
return out
"""


def _key(session_id: str, part: str) -> str:
    return f"navi:run:{session_id}:{part}"


class RedisStore:
    """Shared state in Redis (scale-out mode).

    redis.asyncio connections belong to the event loop that opened them, and this store
    is used from several loops (the server's, a Celery worker's fresh loop, test loops),
    so there is one async client per loop; the sync client serves threads.
    """

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self._sync = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CommandBatcher] = weakref.WeakKeyDictionary()

    def _client(self) -> Any:
        import redis.asyncio as aioredis

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # A blocking pool: with more concurrent runs than connections, an append waits for a
            # free connection instead of failing with MaxConnectionsError (100 streaming sessions
            # hit the default pool's limit of 100 and every event after that was lost live).
            # A connection idle since Redis restarted is dead: each is checked with a PING before its next
            # command once idle for HEALTH_CHECK_S, and a failed PING or a command on a closed connection is
            # tried once more on a new one (a stale pooled connection failed a later turn's busy check, and
            # the websocket closed with 1011). Only connection errors: a timeout may have run the command.
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import ConnectionError as RedisConnectionError

            pool = aioredis.BlockingConnectionPool.from_url(
                self.url, max_connections=MAX_CONNECTIONS, timeout=5, socket_timeout=5, socket_connect_timeout=5,
                health_check_interval=HEALTH_CHECK_S,
                retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))
            client = aioredis.Redis(connection_pool=pool)
            self._clients[loop] = client
        return client

    def _batcher(self) -> CommandBatcher:
        """The event writes of every run on this loop, pipelined (``redis_batch``)."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = CommandBatcher(self._client)
        return batcher

    async def acquire(self, session_id: str, run_id: str) -> bool:
        r = self._client()
        ok = await r.set(_key(session_id, "lock"), run_id, nx=True, ex=LOCK_TTL_S)
        if ok:
            await r.delete(_key(session_id, "stop"))
        return bool(ok)

    async def refresh(self, session_id: str, run_id: str) -> None:
        await self._client().eval(_REFRESH, 1, _key(session_id, "lock"), run_id, LOCK_TTL_S)

    async def release(self, session_id: str, run_id: str) -> None:
        r = self._client()
        await r.eval(_RELEASE, 1, _key(session_id, "lock"), run_id)
        await r.delete(_key(session_id, "stop"))

    def release_sync(self, session_id: str, run_id: str) -> None:
        if self._sync.eval(_RELEASE, 1, _key(session_id, "lock"), run_id):
            self._sync.delete(_key(session_id, "stop"))

    async def busy(self, session_id: str) -> bool:
        return bool(await self._client().exists(_key(session_id, "lock")))

    def busy_sync(self, session_id: str) -> bool:
        return bool(self._sync.exists(_key(session_id, "lock")))

    def busy_many_sync(self, session_ids: list[str]) -> set[str]:
        if not session_ids:
            return set()
        values = self._sync.mget([_key(sid, "lock") for sid in session_ids])
        return {sid for sid, v in zip(session_ids, values, strict=True) if v is not None}

    async def begin_log(self, session_id: str) -> int:
        pipe = self._client().pipeline(transaction=True)
        pipe.delete(_key(session_id, "log"))
        pipe.get(_key(session_id, "seq"))
        _, seq = await pipe.execute()
        return int(seq or 0)

    async def append(self, session_id: str, seq: int, event: dict[str, Any]) -> None:
        # The run holds the session's lock, so it is the only writer: no INCR race.
        await self._batcher().call("EVAL", _APPEND, 2, *self._append_args(session_id, seq, event))

    async def append_and_publish(self, session_id: str, seq: int, event: dict[str, Any], channel: str,
                                 payload: bytes) -> None:
        """``append``, and PUBLISH ``payload`` to ``channel`` of this Redis in the same command
        (``sessions_app.bus.redis_publication``): one command per event instead of a logged
        MULTI of three writes and a PUBLISH on another connection."""
        await self._batcher().call("EVAL", _APPEND, 2, *self._append_args(session_id, seq, event), channel, payload)

    @staticmethod
    def _append_args(session_id: str, seq: int, event: dict[str, Any]) -> tuple[Any, ...]:
        return (_key(session_id, "seq"), _key(session_id, "log"), seq, eventjson.dumps(event), SEQ_TTL_S, LOG_TTL_S)

    async def snapshot(self, session_id: str) -> Snapshot:
        pipe = self._client().pipeline(transaction=True)
        pipe.exists(_key(session_id, "lock"))
        pipe.lrange(_key(session_id, "log"), 0, -1)
        pipe.get(_key(session_id, "seq"))
        active, raw, seq = await pipe.execute()
        return Snapshot(active=bool(active), events=[json.loads(item) for item in raw], last_seq=int(seq or 0))

    async def tail(self, session_id: str, after: int) -> Snapshot:
        keys = (_key(session_id, "lock"), _key(session_id, "log"), _key(session_id, "seq"))
        active, seq, *raw = await self._client().eval(_TAIL, 3, *keys, after)
        events = [e for e in map(json.loads, raw) if e["seq"] > after]
        return Snapshot(active=bool(active), events=events, last_seq=int(seq))

    async def request_stop(self, session_id: str) -> bool:
        keys = (_key(session_id, "lock"), _key(session_id, "stop"))
        return bool(await self._client().eval(_STOP, 2, *keys, STOP_TTL_S))

    def request_stop_sync(self, session_id: str) -> bool:
        keys = (_key(session_id, "lock"), _key(session_id, "stop"))
        return bool(self._sync.eval(_STOP, 2, *keys, STOP_TTL_S))

    async def stop_requested(self, session_id: str, run_id: str) -> bool:
        keys = (_key(session_id, "lock"), _key(session_id, "stop"))
        value = await self._client().eval(_POLL, 2, *keys, run_id, LOCK_TTL_S)
        return value is not None and value.decode() == run_id
