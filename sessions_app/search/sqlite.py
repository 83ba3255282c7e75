"""Search, SQLite FTS5 (embedded tier): bm25 over the triggers-fed index of schema.py."""
from __future__ import annotations

import uuid

from django.db import connection

from sessions_app.search.query import fts5_query

_MESSAGES = """
SELECT m.id, bm25(sessions_app_message_fts) AS rank
FROM sessions_app_message_fts
JOIN sessions_app_message m ON m.id = sessions_app_message_fts.rowid
JOIN sessions_app_session s ON s.id = m.session_id
WHERE sessions_app_message_fts MATCH %s AND s.owner_id = %s
  AND m.buffer IN ('both', 'messages') AND m.role IN ('user', 'assistant', 'tool')
ORDER BY rank, m.id DESC
LIMIT %s OFFSET %s
"""

_TITLES = """
SELECT s.id FROM sessions_app_title_fts
JOIN sessions_app_session s ON s.id = sessions_app_title_fts.session_id
WHERE sessions_app_title_fts MATCH %s AND s.owner_id = %s
ORDER BY bm25(sessions_app_title_fts), s.last_active DESC
LIMIT %s
"""


def message_ids(*, user_id: int, words: list[str], limit: int, offset: int) -> list[tuple[int, float]]:
    """(message id, score) best first; bm25 is lower-is-better, the score higher-is-better."""
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES, [fts5_query(words), user_id, limit, offset])
        return [(int(row[0]), -float(row[1])) for row in cursor.fetchall()]


def title_ids(*, user_id: int, words: list[str], limit: int) -> list[uuid.UUID]:
    with connection.cursor() as cursor:
        cursor.execute(_TITLES, [fts5_query(words), user_id, limit])
        return [uuid.UUID(str(row[0])) for row in cursor.fetchall()]
