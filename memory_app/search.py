"""Ranked keyword search over a user's facts.

SQLite: an FTS5 table (``memory_facts_fts``, external content) kept in sync by
triggers, ranked with bm25. PostgreSQL: ``websearch_to_tsquery`` against a GIN
expression index, ranked with ``ts_rank``. Both are created by migration 0002;
``install_sqlite_fts`` must run again after any SQLite migration that rebuilds
the ``memory_facts`` table (a table rebuild drops its triggers).

User input never reaches the query syntax: it is cut into words first, so quotes,
operators and brackets in a query can never make the search fail.
"""
from __future__ import annotations

import re
from typing import Any

from django.db import connection
from django.utils import timezone

from memory_app.models import MemoryFact

MAX_TERMS = 16
MAX_CANDIDATES = 500
_WORD = re.compile(r"\w+", re.UNICODE)

# The same expression in the index and in the query, or PostgreSQL will not use the index.
PG_DOCUMENT = "to_tsvector('english', category || ' ' || replace(key, '_', ' ') || ' ' || value)"

SQLITE_FTS_SQL: tuple[str, ...] = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_facts_fts USING fts5("
    "category, key, value, content='memory_facts', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "DROP TRIGGER IF EXISTS memory_facts_fts_ai",
    "DROP TRIGGER IF EXISTS memory_facts_fts_ad",
    "DROP TRIGGER IF EXISTS memory_facts_fts_au",
    "CREATE TRIGGER memory_facts_fts_ai AFTER INSERT ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts(rowid, category, key, value) VALUES (new.id, new.category, new.key, new.value); "
    "END",
    "CREATE TRIGGER memory_facts_fts_ad AFTER DELETE ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts(memory_facts_fts, rowid, category, key, value) "
    "VALUES ('delete', old.id, old.category, old.key, old.value); "
    "END",
    "CREATE TRIGGER memory_facts_fts_au AFTER UPDATE ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts(memory_facts_fts, rowid, category, key, value) "
    "VALUES ('delete', old.id, old.category, old.key, old.value); "
    "INSERT INTO memory_facts_fts(rowid, category, key, value) VALUES (new.id, new.category, new.key, new.value); "
    "END",
    "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('rebuild')",
)
SQLITE_DROP_SQL: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS memory_facts_fts_ai",
    "DROP TRIGGER IF EXISTS memory_facts_fts_ad",
    "DROP TRIGGER IF EXISTS memory_facts_fts_au",
    "DROP TABLE IF EXISTS memory_facts_fts",
)
PG_INDEX_SQL = f"CREATE INDEX IF NOT EXISTS memory_facts_search_gin ON memory_facts USING GIN (({PG_DOCUMENT}))"
PG_DROP_SQL = "DROP INDEX IF EXISTS memory_facts_search_gin"


def install_search(schema_editor: Any) -> None:
    """Create the search structures for the current database (idempotent)."""
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in SQLITE_FTS_SQL:
            schema_editor.execute(statement)
    elif vendor == "postgresql":
        schema_editor.execute(PG_INDEX_SQL)


def uninstall_search(schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in SQLITE_DROP_SQL:
            schema_editor.execute(statement)
    elif vendor == "postgresql":
        schema_editor.execute(PG_DROP_SQL)


def query_terms(query: str) -> list[str]:
    """The words of a query (at most MAX_TERMS, deduplicated, lowercase)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        word = word.strip("_")
        if word:
            seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression: each word quoted (so it is never an operator), prefix-matched, OR-ed."""
    return " OR ".join('"' + t.replace('"', '""') + '"*' for t in terms)


def _sqlite_ids(user_id: int, terms: list[str], category: str | None, cap: int) -> list[int]:
    sql = (
        "SELECT f.id FROM memory_facts_fts JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
        "WHERE memory_facts_fts MATCH %s AND f.user_id = %s AND (f.expires_at IS NULL OR f.expires_at > %s)"
    )
    params: list[Any] = [fts5_match(terms), user_id, timezone.now()]
    if category:
        sql += " AND f.category = %s"
        params.append(category)
    sql += " ORDER BY bm25(memory_facts_fts, 1.0, 3.0, 2.0), f.updated_at DESC LIMIT %s"
    params.append(cap)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _postgres_ids(user_id: int, terms: list[str], category: str | None, cap: int) -> list[int]:
    # websearch_to_tsquery never raises on user syntax; " or " between plain words gives OR semantics.
    sql = (
        f"SELECT id FROM memory_facts, websearch_to_tsquery('english', %s) AS q "
        f"WHERE {PG_DOCUMENT} @@ q AND user_id = %s AND (expires_at IS NULL OR expires_at > %s)"
    )
    params: list[Any] = [" or ".join(terms), user_id, timezone.now()]
    if category:
        sql += " AND category = %s"
        params.append(category)
    sql += f" ORDER BY ts_rank({PG_DOCUMENT}, q) DESC, updated_at DESC LIMIT %s"
    params.append(cap)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def ranked_fact_ids(*, user_id: int, query: str, category: str | None = None, cap: int = MAX_CANDIDATES) -> list[int]:
    """Ids of the user's non-expired facts matching ``query``, best first."""
    terms = query_terms(query)
    if not terms:
        return []
    if connection.vendor == "postgresql":
        return _postgres_ids(user_id, terms, category, cap)
    return _sqlite_ids(user_id, terms, category, cap)


def search_facts(*, user_id: int, query: str, limit: int = 10, category: str | None = None) -> list[MemoryFact]:
    """The user's non-expired facts matching ``query``, best match first (at most ``limit``)."""
    ids = ranked_fact_ids(user_id=user_id, query=query, category=category, cap=max(1, limit))
    by_id = MemoryFact.objects.filter(user_id=user_id).in_bulk(ids)
    return [by_id[i] for i in ids if i in by_id]
