"""Search, PostgreSQL full text (scale-out tier): the GIN-indexed ``search_vector`` column of
schema.py, matched with ``to_tsquery`` and ranked by ``ts_rank_cd`` (cover density), as
``django.contrib.postgres.search.SearchRank(cover_density=True)`` would.

Only the newest ``RANKED_WINDOW`` matches are ranked (``ranking.py``): ranking reads each match's
whole vector, so ranking every match of a common word would cost in proportion to its matches.
"""
from __future__ import annotations

import uuid

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVectorField
from django.db import connection
from django.db.models.expressions import RawSQL

from sessions_app.models import Session
from sessions_app.search.query import tsquery
from sessions_app.search.ranking import RANKED_WINDOW, read_pages
from sessions_app.search.schema import _pg_words

_MATCHES = """
SELECT m.id{vector}
FROM sessions_app_message m JOIN sessions_app_session s ON s.id = m.session_id
WHERE m.search_vector @@ to_tsquery('simple'::regconfig, %s) AND s.owner_id = %s
  AND m.buffer IN ('both', 'messages') AND m.role IN ('user', 'assistant', 'tool')
ORDER BY m.id DESC
LIMIT %s OFFSET %s
"""
_RANKED = f"""
SELECT id, ts_rank_cd(vector, to_tsquery('simple'::regconfig, %s)) AS score
FROM ({_MATCHES.format(vector=", m.search_vector AS vector")}) window_
ORDER BY score DESC, id DESC
LIMIT %s OFFSET %s
"""
_NEWEST = _MATCHES.format(vector="")


def _query(words: list[str]) -> SearchQuery:
    return SearchQuery(tsquery(words), search_type="raw", config="simple")


def message_ids(*, user_id: int, words: list[str], limit: int, offset: int) -> list[tuple[int, float]]:
    """(message id, score) best first; matches older than the ranked window follow it newest first, with a score of 0."""
    query = tsquery(words)
    with connection.cursor() as cursor:
        return read_pages(cursor, limit=limit, offset=offset,
                          ranked=(_RANKED, [query, query, user_id, RANKED_WINDOW, 0]),
                          newest=(_NEWEST, [query, user_id]), higher_is_better=True)


def title_ids(*, user_id: int, words: list[str], limit: int) -> list[uuid.UUID]:
    query = _query(words)
    vector = RawSQL(f"to_tsvector('simple'::regconfig, {_pg_words('title', in_query=True)})", [],
                    output_field=SearchVectorField())
    rows = (Session.objects.filter(owner_id=user_id).annotate(vector=vector).filter(vector=query)
            .annotate(score=SearchRank(vector, query)).order_by("-score", "-last_active")
            .values_list("id", flat=True)[:limit])
    return list(rows)
