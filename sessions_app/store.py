"""The Django implementation of agent.store.SessionStore."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from agent.llm.base import ChatMessage, ToolCallRequest
from agent.store import SessionNotFound, SessionState, StoredMessage
from navi_site.db_connections import reconnecting
from sessions_app import services, turns
from sessions_app.models import Message, Session
from sessions_app.runs import drafts
from sessions_app.selectors import context_messages


def to_chat(row: Message) -> ChatMessage:
    return ChatMessage(
        role=row.role,  # type: ignore[arg-type]
        content=row.content,
        images=tuple(row.images or ()),
        tool_calls=tuple(
            ToolCallRequest(id=c.get("id", ""), name=c.get("name", ""), arguments=c.get("arguments") or {})
            for c in (row.tool_calls or ())
        ),
        tool_call_id=row.tool_call_id or None,
        name=row.name or None,
        thinking=row.thinking,
        is_plan=row.is_plan,
        is_summary=row.is_summary,
        is_recall=row.is_recall,
        is_compression=row.is_compression,
        metadata=row.metadata or {},
    )


def _row_fields(msg: ChatMessage) -> dict[str, Any]:
    metadata = dict(msg.metadata)
    metadata.pop("base64", None)  # images live in `images`, not twice in metadata
    return {
        "images": list(msg.images),
        "tool_calls": [c.to_dict() for c in msg.tool_calls],
        "tool_call_id": msg.tool_call_id or "",
        "name": msg.name or "",
        "thinking": msg.thinking,
        "is_plan": msg.is_plan,
        "is_summary": msg.is_summary,
        "is_recall": msg.is_recall,
        "is_compression": msg.is_compression,
        "metadata": metadata,
    }


class DjangoSessionStore:
    """Sessions in the database, with a per-process cache of each session's context.

    The cache entry is valid while the session's ``next_seq`` is unchanged: every
    append and every compression bumps it, so a turn on a long session costs one
    small query instead of re-reading every row (and a turn served by another
    process simply reloads).
    """

    def __init__(self, cache_size: int = 256) -> None:
        self._cache: OrderedDict[str, tuple[int, list[StoredMessage]]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @sync_to_async(thread_sensitive=False)
    @reconnecting
    def load(self, session_id: str) -> SessionState:
        session = Session.objects.select_related("owner").filter(pk=session_id).first()
        if session is None:
            raise SessionNotFound(f"Session {session_id} not found.")
        owner = session.owner
        return SessionState(
            id=str(session.id),
            owner_id=owner.pk,
            owner_is_staff=bool(owner.is_staff),
            owner_info={"username": owner.get_username(), "name": owner.get_full_name() or owner.get_username()},
            profile_id=session.profile_id,
            context=self._context(str(session.id), int(session.next_seq)),
            context_token_count=session.context_token_count,
            model=session.model,
            model_backend=session.model_backend,
        )

    def _context(self, session_id: str, next_seq: int) -> list[StoredMessage]:
        with self._lock:
            cached = self._cache.get(session_id)
            if cached is not None and cached[0] == next_seq:
                self._cache.move_to_end(session_id)
                return list(cached[1])
        rows = context_messages(session_id=session_id)
        context = [StoredMessage(seq=r.seq, message=to_chat(r)) for r in rows]
        self._remember(session_id, next_seq, context)
        return list(context)

    def _remember(self, session_id: str, next_seq: int, context: list[StoredMessage]) -> None:
        with self._lock:
            self._cache[session_id] = (next_seq, context)
            self._cache.move_to_end(session_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _extend_cache(self, session_id: str, seq: int, message: ChatMessage, buffer: str) -> None:
        """After our own append: keep the cached context current instead of dropping it."""
        with self._lock:
            cached = self._cache.get(session_id)
            if cached is None or cached[0] != seq:
                self._cache.pop(session_id, None)
                return
            context = cached[1] + ([StoredMessage(seq=seq, message=message)] if buffer != "messages" else [])
            self._cache[session_id] = (seq + 1, context)

    async def append(self, session_id: str, message: ChatMessage, *, run_id: str, buffer: str = "both") -> int:
        """Save one message now. In a run of the registry (it has a draft) the first message opens
        the turn's ``RunningTurn`` row and an assistant message empties the partial answer, in the
        same transaction and under the draft's lock (``sessions_app.runs.drafts``)."""
        draft = drafts.get(run_id) if run_id else None
        if draft is None:
            return await self._append(session_id, message, run_id=run_id, buffer=buffer, open_turn=False,
                                      consumes=False)
        async with draft.lock:
            consumes = message.role == "assistant" and draft.opened
            seq = await self._append(session_id, message, run_id=run_id, buffer=buffer,
                                     open_turn=not draft.opened, consumes=consumes and draft.stored)
            draft.opened = True
            if consumes:
                draft.consumed()
                draft.stored = False
            return seq

    @sync_to_async(thread_sensitive=False)
    @reconnecting
    def _append(self, session_id: str, message: ChatMessage, *, run_id: str, buffer: str, open_turn: bool,
                consumes: bool) -> int:
        with transaction.atomic():
            row = services.message_append(
                session_id=session_id, role=message.role, content=message.content, buffer=buffer, run_id=run_id,
                **_row_fields(message),
            )
            if open_turn:
                turns.running_turn_open(session_id=str(session_id), run_id=run_id)
            elif consumes:
                turns.running_turn_clear_partial(run_id=run_id)
        self._extend_cache(str(session_id), int(row.seq), message, buffer)
        return int(row.seq)

    @sync_to_async(thread_sensitive=False)
    @reconnecting
    def set_profile(self, session_id: str, profile_id: str) -> None:
        Session.objects.filter(pk=session_id).update(profile_id=profile_id)

    @sync_to_async(thread_sensitive=False)
    @reconnecting
    def set_token_count(self, session_id: str, count: int) -> None:
        Session.objects.filter(pk=session_id).update(context_token_count=max(0, int(count)))

    @sync_to_async(thread_sensitive=False)
    @reconnecting
    def compress(self, session_id: str, *, removed: list[int], summary: ChatMessage) -> None:
        with transaction.atomic():
            rows = Message.objects.filter(session_id=session_id, seq__in=removed)
            rows.filter(buffer=Message.Buffer.BOTH).update(buffer=Message.Buffer.MESSAGES)
            rows.filter(buffer=Message.Buffer.CONTEXT).delete()
            services.message_append(
                session_id=session_id, role=summary.role, content=summary.content,
                buffer=Message.Buffer.CONTEXT, **_row_fields(summary),
            )
            Session.objects.filter(pk=session_id).update(context_token_count=0)
        with self._lock:
            self._cache.pop(str(session_id), None)

    @sync_to_async(thread_sensitive=False)
    @reconnecting
    def mark_interrupted(self, session_id: str, run_id: str) -> None:
        Message.objects.filter(session_id=session_id, run_id=run_id, role="user").update(interrupted=True)
