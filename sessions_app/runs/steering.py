"""Steering: messages sent while a turn runs wait in the session's inbox for the turn's next step.

A message is queued for the run that holds the session's lock at that moment, atomically with the
check that a run holds it (no run: the caller starts a normal turn instead). The loop takes the
queue at every step boundary (``agent.ports.Steering``, implemented by ``steering_port.RegistrySteering``); a
queued message can be withdrawn until then. When the run ends, the registry closes its inbox (no
message can be queued for it any more) and takes what is left: those messages were not used, and
the clients are told (``steer_dropped``) so that the text goes back to the user.

``LocalInbox`` (embedded mode): a list per session beside ``LocalStore``'s lock, under its mutex.
``RedisInbox`` (scale-out): Lua scripts over the run's lock key, so a message sent to any process
reaches the run wherever it executes, like a stop request. Keys of session S::

    navi:run:S:steer         the queue: "<run_id>\\n<json item>" entries (RPUSH)   1 hour
    navi:run:S:steer_closed  run_id of the last run whose inbox was closed         1 hour
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Literal

from sessions_app.runs.store import LocalStore, RedisStore, RunStore

MAX_QUEUED = 20  # per session: a turn reads them all at its next step; more is a stuck client
MAX_STEER_CHARS = 100_000
INBOX_TTL_S = 3600
STEER_GONE = ("That message is no longer waiting: the turn already read it, it was withdrawn, or the turn "
              "ended (its text was given back).")


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerItem:
    id: str
    content: str
    user_id: int | None
    ref: str | None = None
    created: float = 0.0

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content}


Queued = tuple[Literal["queued", "no_run", "full"], SteerItem | None]


def new_item(*, content: str, user_id: int | None, ref: str | None) -> SteerItem:
    return SteerItem(id="st_" + uuid.uuid4().hex[:16], content=content, user_id=user_id,
                     ref=(str(ref)[:100] if ref is not None else None), created=time.time())


class LocalInbox:
    def __init__(self, store: LocalStore) -> None:
        self.store = store
        self._queues: dict[str, list[tuple[str, SteerItem]]] = {}
        self._closed: dict[str, str] = {}

    async def push(self, session_id: str, item: SteerItem) -> Queued:
        with self.store._mutex:
            run = self.store.holder(session_id)
            if run is None or self._closed.get(session_id) == run:
                return "no_run", None
            queue = [e for e in self._queues.get(session_id, []) if e[0] == run]
            if len(queue) >= MAX_QUEUED:
                return "full", None
            queue.append((run, item))
            self._queues[session_id] = queue
            return "queued", item

    async def take(self, session_id: str, run_id: str) -> list[SteerItem]:
        with self.store._mutex:
            return [item for run, item in self._queues.pop(session_id, []) if run == run_id]

    async def close(self, session_id: str, run_id: str) -> list[SteerItem]:
        with self.store._mutex:
            self._closed[session_id] = run_id
            return [item for run, item in self._queues.pop(session_id, []) if run == run_id]

    async def withdraw(self, session_id: str, steer_id: str) -> SteerItem | None:
        with self.store._mutex:
            queue = self._queues.get(session_id, [])
            for i, (_, item) in enumerate(queue):
                if item.id == steer_id:
                    del queue[i]
                    return item
            return None

    def pending_sync(self, session_id: str) -> list[SteerItem]:
        with self.store._mutex:
            run = self.store.holder(session_id)
            return [item for r, item in self._queues.get(session_id, []) if r == run]


_PUSH = """
local run = redis.call('GET', KEYS[1])
if not run then return {'no_run', ''} end
if redis.call('GET', KEYS[3]) == run then return {'no_run', ''} end
local n = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  if string.sub(entry, 1, #run + 1) == run .. '\\n' then n = n + 1 end
end
if n >= tonumber(ARGV[2]) then return {'full', run} end
redis.call('RPUSH', KEYS[2], run .. '\\n' .. ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {'queued', run}
"""
# Take (and, with ARGV[2] set, close) the run's queue; entries of other (dead) runs are dropped.
_TAKE = """
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2]) end
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
local out = {}
for _, entry in ipairs(entries) do
  if string.sub(entry, 1, #ARGV[1] + 1) == ARGV[1] .. '\\n' then out[#out + 1] = entry end
end
return out
"""
_WITHDRAW = """
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local nl = string.find(entry, '\\n', 1, true)
  if nl and cjson.decode(string.sub(entry, nl + 1))['id'] == ARGV[1] then
    redis.call('LREM', KEYS[1], 1, entry)
    return entry
  end
end
return false
"""


def _key(session_id: str, part: str) -> str:
    return f"navi:run:{session_id}:{part}"


def _decode(entry: bytes | str) -> tuple[str, SteerItem]:
    text = entry.decode() if isinstance(entry, bytes) else entry
    run, _, raw = text.partition("\n")
    return run, SteerItem(**json.loads(raw))


class RedisInbox:
    def __init__(self, store: RedisStore) -> None:
        self.store = store

    async def push(self, session_id: str, item: SteerItem) -> Queued:
        keys = (_key(session_id, "lock"), _key(session_id, "steer"), _key(session_id, "steer_closed"))
        status, _ = await self.store._client().eval(_PUSH, 3, *keys, json.dumps(asdict(item)), MAX_QUEUED,
                                                    INBOX_TTL_S)
        status = status.decode() if isinstance(status, bytes) else status
        return (status, item if status == "queued" else None)  # type: ignore[return-value]

    async def take(self, session_id: str, run_id: str) -> list[SteerItem]:
        return await self._take(session_id, run_id, close=False)

    async def close(self, session_id: str, run_id: str) -> list[SteerItem]:
        return await self._take(session_id, run_id, close=True)

    async def _take(self, session_id: str, run_id: str, *, close: bool) -> list[SteerItem]:
        keys = (_key(session_id, "steer"), _key(session_id, "steer_closed"))
        entries = await self.store._client().eval(_TAKE, 2, *keys, run_id, INBOX_TTL_S if close else "")
        return [_decode(e)[1] for e in entries]

    async def withdraw(self, session_id: str, steer_id: str) -> SteerItem | None:
        entry = await self.store._client().eval(_WITHDRAW, 1, _key(session_id, "steer"), steer_id)
        return _decode(entry)[1] if entry else None

    def pending_sync(self, session_id: str) -> list[SteerItem]:
        sync = self.store._sync
        pipe = sync.pipeline(transaction=True)
        pipe.get(_key(session_id, "lock"))
        pipe.lrange(_key(session_id, "steer"), 0, -1)
        run, entries = pipe.execute()
        if run is None:
            return []
        holder = run.decode()
        return [item for r, item in map(_decode, entries) if r == holder]


Inbox = LocalInbox | RedisInbox


def inbox_for(store: RunStore) -> Inbox:
    if isinstance(store, RedisStore):
        return RedisInbox(store)
    if isinstance(store, LocalStore):
        return LocalInbox(store)
    raise TypeError(f"no steering inbox for {type(store).__name__}")
