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
from sessions_app.search.ranking import RANKED_WINDOW, pages
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
    found: list[tuple[int, float]] = []
    with connection.cursor() as cursor:
        for page in pages(limit=limit, offset=offset):
            if page.ranked:
                cursor.execute(_RANKED, [query, query, user_id, RANKED_WINDOW, 0, page.limit, page.offset])
                found += [(int(pk), float(score)) for pk, score in cursor.fetchall()]
            else:
                cursor.execute(_NEWEST, [query, user_id, page.limit, page.offset])
                found += [(int(pk), 0.0) for (pk,) in cursor.fetchall()]
    return found


def title_ids(*, user_id: int, words: list[str], limit: int) -> list[uuid.UUID]:
    query = _query(words)
    vector = RawSQL(f"to_tsvector('simple'::regconfig, {_pg_words('title', in_query=True)})", [],
                    output_field=SearchVectorField())
    rows = (Session.objects.filter(owner_id=user_id).annotate(vector=vector).filter(vector=query)
            .annotate(score=SearchRank(vector, query)).order_by("-score", "-last_active")
            .values_list("id", flat=True)[:limit])
    return list(rows)
