"""Search across a user's conversations (issue 22): one selector, two engines.

``search(user_id=, q=, limit=, offset=)`` finds the words of ``q`` (``query.terms``) in the user's
session titles and in every shown message (user and assistant text, tool results), best first,
each with a one-line snippet and the offsets of its matches. SQLite (embedded) answers from the
FTS5 index (bm25); PostgreSQL (scale-out) from the GIN-indexed ``search_vector`` through
``django.contrib.postgres.search`` (ts_rank_cd). The index lives in the database and is fed by it
(``schema.py``): whatever writes a message — a turn, recovery, an import — is searchable at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from sessions_app.models import Message, Session
from sessions_app.search.query import Snippet, snippet, terms

MAX_TITLE_HITS = 10
TITLE_CHARS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageHit:
    session_id: str
    session_title: str
    message_id: int
    seq: int
    role: str
    name: str
    created_at: datetime
    snippet: Snippet
    score: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TitleHit:
    session_id: str
    title: str
    last_active: datetime
    snippet: Snippet


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    terms: list[str]
    sessions: list[TitleHit]
    messages: list[MessageHit]
    has_more: bool


def search(*, user_id: int, q: str, limit: int = 20, offset: int = 0) -> SearchResult:
    """Ranked hits among the sessions of the user ``user_id``. Raises BadRequest for a query without words or
    longer than ``query.MAX_QUERY_CHARS``."""
    words = terms(q.replace("\x00", ""))
    if connection.vendor == "postgresql":
        from sessions_app.search import postgres as engine
    else:
        from sessions_app.search import sqlite as engine  # type: ignore[no-redef]
    ranked = engine.message_ids(user_id=user_id, words=words, limit=limit + 1, offset=offset)
    shown = ranked[:limit]
    loaded = {m.pk: m for m in Message.objects.filter(pk__in=[pk for pk, _ in shown]).select_related("session")
              .only("id", "seq", "role", "name", "content", "created_at", "session__id", "session__title")}
    messages = [
        MessageHit(session_id=str(m.session.id), session_title=m.session.title, message_id=m.pk, seq=m.seq,
                   role=m.role, name=m.name, created_at=m.created_at, snippet=snippet(m.content, words),
                   score=round(score, 6))
        for pk, score in shown for m in [loaded.get(pk)] if m is not None
    ]
    sessions: list[TitleHit] = []
    if not offset:
        ids = engine.title_ids(user_id=user_id, words=words, limit=MAX_TITLE_HITS)
        found = {s.id: s for s in Session.objects.filter(pk__in=ids).only("id", "title", "last_active")}
        sessions = [TitleHit(session_id=str(s.id), title=s.title, last_active=s.last_active,
                             snippet=snippet(s.title, words, width=TITLE_CHARS))
                    for i in ids for s in [found.get(i)] if s is not None]
    return SearchResult(terms=words, sessions=sessions, messages=messages, has_more=len(ranked) > limit)


def search_to_dict(result: SearchResult) -> dict[str, Any]:
    """The wire form of GET /search."""
    return {
        "terms": result.terms,
        "sessions": [{"session_id": t.session_id, "title": t.title, "last_active": t.last_active.isoformat(),
                      "highlights": [list(h) for h in t.snippet.highlights]} for t in result.sessions],
        "results": [{"session_id": m.session_id, "session_title": m.session_title, "message_id": m.message_id,
                     "seq": m.seq, "role": m.role, "name": m.name or None, "created_at": m.created_at.isoformat(),
                     "snippet": m.snippet.text, "highlights": [list(h) for h in m.snippet.highlights],
                     "score": m.score} for m in result.messages],
        "has_more": result.has_more,
    }
