"""REST: GET /search — full-text search over the user's own conversations (issue 22)."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema

from sessions_app.schemas import ErrorOut
from sessions_app.search import search, search_to_dict

router = Router(tags=["search"])


class TitleHitOut(Schema):
    session_id: str
    title: str
    last_active: str
    highlights: list[list[int]]


class MessageHitOut(Schema):
    session_id: str
    session_title: str
    message_id: int
    seq: int
    role: str
    name: str | None
    created_at: str
    snippet: str
    highlights: list[list[int]]
    score: float


class SearchOut(Schema):
    terms: list[str]
    sessions: list[TitleHitOut]
    results: list[MessageHitOut]
    has_more: bool


@router.get("", response={200: SearchOut, 400: ErrorOut},
            summary="Search your conversations: titles, messages and tool results, best first")
def search_sessions(
    request: HttpRequest,
    q: str = Query("", description="Words to find (every word must occur; each matches as a prefix). "
                                   "Punctuation and operators are ignored. At most 500 characters."),
    limit: int = Query(20, ge=1, le=50),
    offset: int = Query(0, ge=0, le=1000),
) -> dict[str, Any]:
    """``sessions``: conversations whose title matches; ``results``: matching messages with a
    one-line ``snippet`` and ``highlights`` ([start, end) offsets of the matches in it)."""
    return search_to_dict(search(user_id=request.user.pk, q=q, limit=limit, offset=offset))
