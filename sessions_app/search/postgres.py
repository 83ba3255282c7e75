"""Search, PostgreSQL full text (scale-out tier): the GIN-indexed ``search_vector`` column of
schema.py, queried through ``django.contrib.postgres.search`` and ranked by ts_rank_cd."""
from __future__ import annotations

import uuid

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVectorField
from django.db.models.expressions import RawSQL

from sessions_app.models import Message, Session
from sessions_app.search.query import tsquery
from sessions_app.search.schema import _pg_words

SHOWN_BUFFERS = ("both", "messages")
SHOWN_ROLES = ("user", "assistant", "tool")


def _query(words: list[str]) -> SearchQuery:
    return SearchQuery(tsquery(words), search_type="raw", config="simple")


def message_ids(*, user_id: int, words: list[str], limit: int, offset: int) -> list[tuple[int, float]]:
    query = _query(words)
    vector = RawSQL('"sessions_app_message"."search_vector"', [], output_field=SearchVectorField())
    rows = (Message.objects.filter(session__owner_id=user_id, buffer__in=SHOWN_BUFFERS, role__in=SHOWN_ROLES)
            .annotate(vector=vector).filter(vector=query)
            .annotate(score=SearchRank(vector, query, cover_density=True))
            .order_by("-score", "-id").values_list("id", "score")[offset: offset + limit])
    return [(int(pk), float(score)) for pk, score in rows]


def title_ids(*, user_id: int, words: list[str], limit: int) -> list[uuid.UUID]:
    query = _query(words)
    vector = RawSQL(f"to_tsvector('simple'::regconfig, {_pg_words('title', in_query=True)})", [],
                    output_field=SearchVectorField())
    rows = (Session.objects.filter(owner_id=user_id).annotate(vector=vector).filter(vector=query)
            .annotate(score=SearchRank(vector, query)).order_by("-score", "-last_active")
            .values_list("id", flat=True)[:limit])
    return list(rows)
