"""The database side of search: SQLite FTS5 tables fed by triggers, or a PostgreSQL generated
``tsvector`` column with a GIN index. Installed by migration 0004; ``repair`` puts back SQLite
triggers that a later migration dropped (SQLite rebuilds a table to alter it, and its triggers go
with the old table) and re-indexes, so the index can never silently fall behind.

SQLite keeps a prefix index of every word's first three letters (``prefix='3'``): a query word
matches as a prefix (query.py), and without it a three-letter word would be answered by merging the
lists of every word that starts with it. Migration 0006 rebuilds an index made before it.

Both tiers index the first ``INDEXED_CHARS`` characters of a message with ASCII punctuation read as
a space, so that both cut text into the same words as ``query.terms`` does.
"""
from __future__ import annotations

from typing import Any

INDEXED_CHARS = 100_000
PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

SQLITE_FORWARD = [
    """CREATE VIRTUAL TABLE sessions_app_message_fts USING fts5(
        content, content='sessions_app_message', content_rowid='id', tokenize='unicode61 remove_diacritics 2',
        prefix='3')""",
    f"""CREATE TRIGGER sessions_app_message_fts_ai AFTER INSERT ON sessions_app_message BEGIN
        INSERT INTO sessions_app_message_fts(rowid, content) VALUES (new.id, substr(new.content, 1, {INDEXED_CHARS}));
    END""",
    f"""CREATE TRIGGER sessions_app_message_fts_ad AFTER DELETE ON sessions_app_message BEGIN
        INSERT INTO sessions_app_message_fts(sessions_app_message_fts, rowid, content)
            VALUES ('delete', old.id, substr(old.content, 1, {INDEXED_CHARS}));
    END""",
    f"""CREATE TRIGGER sessions_app_message_fts_au AFTER UPDATE OF content ON sessions_app_message BEGIN
        INSERT INTO sessions_app_message_fts(sessions_app_message_fts, rowid, content)
            VALUES ('delete', old.id, substr(old.content, 1, {INDEXED_CHARS}));
        INSERT INTO sessions_app_message_fts(rowid, content) VALUES (new.id, substr(new.content, 1, {INDEXED_CHARS}));
    END""",
    f"""INSERT INTO sessions_app_message_fts(rowid, content)
        SELECT id, substr(content, 1, {INDEXED_CHARS}) FROM sessions_app_message""",
    # Titles: a plain FTS5 table (a session's key is a UUID, not a stable rowid).
    """CREATE VIRTUAL TABLE sessions_app_title_fts USING fts5(
        title, session_id UNINDEXED, tokenize='unicode61 remove_diacritics 2', prefix='3')""",
    """CREATE TRIGGER sessions_app_title_fts_ai AFTER INSERT ON sessions_app_session BEGIN
        INSERT INTO sessions_app_title_fts(title, session_id) VALUES (new.title, new.id);
    END""",
    """CREATE TRIGGER sessions_app_title_fts_ad AFTER DELETE ON sessions_app_session BEGIN
        DELETE FROM sessions_app_title_fts WHERE session_id = old.id;
    END""",
    """CREATE TRIGGER sessions_app_title_fts_au AFTER UPDATE OF title ON sessions_app_session BEGIN
        DELETE FROM sessions_app_title_fts WHERE session_id = old.id;
        INSERT INTO sessions_app_title_fts(title, session_id) VALUES (new.title, new.id);
    END""",
    "INSERT INTO sessions_app_title_fts(title, session_id) SELECT title, id FROM sessions_app_session",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS sessions_app_title_fts_au",
    "DROP TRIGGER IF EXISTS sessions_app_title_fts_ad",
    "DROP TRIGGER IF EXISTS sessions_app_title_fts_ai",
    "DROP TABLE IF EXISTS sessions_app_title_fts",
    "DROP TRIGGER IF EXISTS sessions_app_message_fts_au",
    "DROP TRIGGER IF EXISTS sessions_app_message_fts_ad",
    "DROP TRIGGER IF EXISTS sessions_app_message_fts_ai",
    "DROP TABLE IF EXISTS sessions_app_message_fts",
]


def _pg_words(column: str, limit: int | None = None, *, in_query: bool = False) -> str:
    """SQL: the text PostgreSQL indexes (punctuation as spaces). ``in_query``: for SQL that also
    has parameters, where a literal percent sign must be doubled."""
    text = f"coalesce({column}, '')" if limit is None else f"left(coalesce({column}, ''), {limit})"
    spaces = " " * len(PUNCT)
    punct = PUNCT.replace("'", "''")
    if in_query:
        punct = punct.replace("%", "%%")
    return f"translate({text}, '{punct}', '{spaces}')"


PG_FORWARD = [
    f"""ALTER TABLE sessions_app_message ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, {_pg_words('content', INDEXED_CHARS)})) STORED""",
    "CREATE INDEX sessions_app_message_search ON sessions_app_message USING gin (search_vector)",
    f"""CREATE INDEX sessions_app_session_title_search ON sessions_app_session
        USING gin (to_tsvector('simple'::regconfig, {_pg_words('title')}))""",
]
PG_BACKWARD = [
    "DROP INDEX IF EXISTS sessions_app_session_title_search",
    "DROP INDEX IF EXISTS sessions_app_message_search",
    "ALTER TABLE sessions_app_message DROP COLUMN IF EXISTS search_vector",
]



SQLITE_TRIGGERS = ("sessions_app_message_fts_ai", "sessions_app_message_fts_ad", "sessions_app_message_fts_au",
                   "sessions_app_title_fts_ai", "sessions_app_title_fts_ad", "sessions_app_title_fts_au")


def install(connection: Any) -> None:
    """Create the search index of ``connection``'s vendor and fill it from the existing rows."""
    statements = {"sqlite": SQLITE_FORWARD, "postgresql": PG_FORWARD}.get(connection.vendor, [])
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def rebuild(connection: Any) -> None:
    """Drop and create the index anew from the rows (SQLite; PostgreSQL's needs no rebuild)."""
    if connection.vendor == "sqlite":
        uninstall(connection)
        install(connection)


def uninstall(connection: Any) -> None:
    statements = {"sqlite": SQLITE_BACKWARD, "postgresql": PG_BACKWARD}.get(connection.vendor, [])
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def repair(connection: Any) -> bool:
    """SQLite: if a trigger is missing while the index tables exist, rebuild the whole index.
    Returns whether it had to. A no-op on PostgreSQL (a generated column survives ALTER TABLE)."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE 'sessions_app_%fts%'")
        present = {row[0] for row in cursor.fetchall()}
    if "sessions_app_message_fts" not in present or all(t in present for t in SQLITE_TRIGGERS):
        return False
    uninstall(connection)
    install(connection)
    return True
