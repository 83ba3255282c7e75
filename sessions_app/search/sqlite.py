"""Search, SQLite FTS5 (embedded tier): bm25 over the triggers-fed index of schema.py.

Only the newest ``RANKED_WINDOW`` matches are ranked (``ranking.py``): FTS5 walks a term's doclist
newest first and stops there, so a word found in half of all messages costs what a rarer one does.
"""
from __future__ import annotations

import uuid

from django.db import connection

from sessions_app.search.query import fts5_query
from sessions_app.search.ranking import RANKED_WINDOW, read_pages

_MATCHES = """
SELECT m.id{score}
FROM sessions_app_message_fts
JOIN sessions_app_message m ON m.id = sessions_app_message_fts.rowid
JOIN sessions_app_session s ON s.id = m.session_id
WHERE sessions_app_message_fts MATCH %s AND s.owner_id = %s
  AND m.buffer IN ('both', 'messages') AND m.role IN ('user', 'assistant', 'tool')
ORDER BY sessions_app_message_fts.rowid DESC
LIMIT %s OFFSET %s
"""
# The window ranked by bm25 (lower is better); the newer of two equal ranks first.
_RANKED = f"""
SELECT id, rank FROM ({_MATCHES.format(score=", bm25(sessions_app_message_fts) AS rank")})
ORDER BY rank, id DESC
LIMIT %s OFFSET %s
"""
_NEWEST = _MATCHES.format(score="")

_TITLES = """
SELECT s.id FROM sessions_app_title_fts
JOIN sessions_app_session s ON s.id = sessions_app_title_fts.session_id
WHERE sessions_app_title_fts MATCH %s AND s.owner_id = %s
ORDER BY bm25(sessions_app_title_fts), s.last_active DESC
LIMIT %s
"""


def message_ids(*, user_id: int, words: list[str], limit: int, offset: int) -> list[tuple[int, float]]:
    """(message id, score) best first; bm25 is lower-is-better, the score higher-is-better. Matches
    older than the ranked window follow it newest first, with a score of 0."""
    match = fts5_query(words)
    with connection.cursor() as cursor:
        return read_pages(cursor, limit=limit, offset=offset, ranked=(_RANKED, [match, user_id, RANKED_WINDOW, 0]),
                          newest=(_NEWEST, [match, user_id]), higher_is_better=False)


def title_ids(*, user_id: int, words: list[str], limit: int) -> list[uuid.UUID]:
    with connection.cursor() as cursor:
        cursor.execute(_TITLES, [fts5_query(words), user_id, limit])
        return [uuid.UUID(str(row[0])) for row in cursor.fetchall()]
