"""Ranked keyword search (FTS5 on SQLite, tsvector on PostgreSQL), always per user."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory_app.models import MemoryFact
from memory_app.search import search_facts
from memory_app.services import fact_delete, fact_update, fact_upsert

pytestmark = pytest.mark.django_db


@pytest.fixture
def facts(user: Any, other_user: Any) -> dict[str, MemoryFact]:
    def add(u: Any, category: str, key: str, value: str) -> MemoryFact:
        return fact_upsert(user_id=u.pk, category=category, key=key, value=value).fact

    return {
        "editor": add(user, "preferences", "favourite_editor", "Neovim with a dark theme"),
        "server": add(user, "environment", "home_server_os", "Debian 12 on a small Intel NUC"),
        "daughter": add(user, "people", "daughter_name", "Mia, born 2015, loves football"),
        "theirs": add(other_user, "preferences", "favourite_editor", "Emacs, dark theme"),
    }


def _keys(results: list[MemoryFact]) -> list[str]:
    return [f.key for f in results]


def test_ranked_keyword_search(user: Any, facts: dict[str, MemoryFact]) -> None:
    assert _keys(search_facts(user_id=user.pk, query="editor")) == ["favourite_editor"]
    assert _keys(search_facts(user_id=user.pk, query="debian server")) == ["home_server_os"]
    # OR semantics, the fact matching more words first
    assert _keys(search_facts(user_id=user.pk, query="neovim dark theme mia"))[0] == "favourite_editor"
    assert set(_keys(search_facts(user_id=user.pk, query="neovim dark theme mia"))) == {
        "favourite_editor", "daughter_name"}
    assert search_facts(user_id=user.pk, query="category", limit=10) == []
    assert _keys(search_facts(user_id=user.pk, query="people")) == ["daughter_name"]  # the category counts


def test_search_never_returns_another_users_facts(user: Any, other_user: Any, facts: dict[str, MemoryFact]) -> None:
    mine = search_facts(user_id=user.pk, query="theme editor emacs")
    assert {f.user_id for f in mine} == {user.pk}
    assert _keys(search_facts(user_id=other_user.pk, query="neovim")) == []
    assert _keys(search_facts(user_id=other_user.pk, query="emacs")) == ["favourite_editor"]


@pytest.mark.parametrize("query", ['"unbalanced', 'AND OR NOT', '(((', 'neovim" OR "x', '*', 'NEAR(a b)',
                                   "col:value", "-minus ^caret", "' ; DROP TABLE memory_facts; --", "", "   "])
def test_hostile_queries_never_fail(user: Any, facts: dict[str, MemoryFact], query: str) -> None:
    results = search_facts(user_id=user.pk, query=query)
    assert all(f.user_id == user.pk for f in results)


def test_index_follows_updates_deletes_and_expiry(user: Any, facts: dict[str, MemoryFact]) -> None:
    editor = facts["editor"]
    fact_update(fact=editor, value="Helix")
    assert _keys(search_facts(user_id=user.pk, query="helix")) == ["favourite_editor"]
    assert search_facts(user_id=user.pk, query="neovim") == []
    fact_delete(fact=facts["server"])
    assert search_facts(user_id=user.pk, query="debian") == []
    MemoryFact.objects.filter(pk=facts["daughter"].pk).update(expires_at=timezone.now() - timedelta(days=1))
    assert search_facts(user_id=user.pk, query="mia") == []


def test_category_filter_and_limit(user: Any, facts: dict[str, MemoryFact]) -> None:
    assert search_facts(user_id=user.pk, query="dark theme mia", category="people")[0].key == "daughter_name"
    assert len(search_facts(user_id=user.pk, query="dark theme mia", limit=1)) == 1


def test_search_structures_exist(user: Any, facts: dict[str, MemoryFact]) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE name LIKE 'memory_facts_fts%%' AND type='trigger'")
            assert {r[0] for r in cursor.fetchall()} == {"memory_facts_fts_ai", "memory_facts_fts_ad",
                                                          "memory_facts_fts_au"}
        else:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(
                "EXPLAIN SELECT id FROM memory_facts WHERE to_tsvector('english', category || ' ' || "
                "replace(key, '_', ' ') || ' ' || value) @@ websearch_to_tsquery('english', 'editor')"
            )
            assert "memory_facts_search_gin" in "\n".join(r[0] for r in cursor.fetchall())
