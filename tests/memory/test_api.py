"""REST /memory: the signed-in user's facts and summary; another user's fact is a 404 like an unknown one."""
from __future__ import annotations

from typing import Any

import pytest

from memory_app.models import MemoryFact, MemoryFactChange, MemorySummary

pytestmark = pytest.mark.django_db


@pytest.fixture
def mine(user: Any) -> list[MemoryFact]:
    return [
        MemoryFact.objects.create(user=user, category="preferences", key="favourite_editor", value="Neovim"),
        MemoryFact.objects.create(user=user, category="environment", key="shell", value="fish shell"),
        MemoryFact.objects.create(user=user, category="people", key="daughter_name", value="Mia"),
    ]


@pytest.fixture
def theirs(other_user: Any) -> MemoryFact:
    return MemoryFact.objects.create(user=other_user, category="preferences", key="favourite_editor", value="Emacs")


def test_list_paginates_filters_and_searches(api: Any, mine: list[MemoryFact], theirs: MemoryFact) -> None:
    page = api.get("/memory/facts?limit=2&offset=0").json()
    assert page["total"] == 3 and len(page["items"]) == 2
    assert api.get("/memory/facts?limit=2&offset=2").json()["items"][0]["key"] == "favourite_editor"
    by_cat = api.get("/memory/facts?category=people").json()
    assert [f["value"] for f in by_cat["items"]] == ["Mia"]
    found = api.get("/memory/facts", data={"q": "editor"}).json()
    assert [f["value"] for f in found["items"]] == ["Neovim"] and found["total"] == 1
    hostile = api.get("/memory/facts", data={"q": '"(( OR * emacs'})
    assert hostile.status_code == 200 and hostile.json()["items"] == []


def test_patch_records_a_change(api: Any, mine: list[MemoryFact], enqueued: list[Any]) -> None:
    fact = mine[0]
    response = api.patch(f"/memory/facts/{fact.pk}", {"value": "Helix", "expires_at": "2099-01-01T00:00:00Z"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["value"] == "Helix" and body["expires_at"].startswith("2099-01-01")
    change = MemoryFactChange.objects.get(fact=fact)
    assert (change.old_value, change.new_value, change.reason) == ("Neovim", "Helix", "user edit")
    cleared = api.patch(f"/memory/facts/{fact.pk}", {"expires_at": None}).json()
    assert cleared["expires_at"] is None and cleared["value"] == "Helix"
    renamed = api.patch(f"/memory/facts/{fact.pk}", {"key": "Main Editor", "category": "work"}).json()
    assert (renamed["category"], renamed["key"]) == ("work", "main_editor")


def test_patch_conflict_and_validation(api: Any, mine: list[MemoryFact]) -> None:
    clash = api.patch(f"/memory/facts/{mine[0].pk}", {"category": "environment", "key": "shell"})
    assert clash.status_code == 409 and "already exists" in clash.json()["detail"]
    empty = api.patch(f"/memory/facts/{mine[0].pk}", {"value": "  "})
    assert empty.status_code == 400 and "value is empty" in empty.json()["detail"]
    assert api.patch(f"/memory/facts/{mine[0].pk}", {"value": "x" * 501}).status_code == 422


def test_delete(api: Any, mine: list[MemoryFact], enqueued: list[Any]) -> None:
    assert api.delete(f"/memory/facts/{mine[0].pk}").json() == {"ok": True}
    assert not MemoryFact.objects.filter(pk=mine[0].pk).exists()
    assert api.delete(f"/memory/facts/{mine[0].pk}").status_code == 404


@pytest.mark.parametrize("method", ["get", "patch", "delete"])
def test_another_users_fact_is_404_like_an_unknown_one(api: Any, theirs: MemoryFact, method: str) -> None:
    call = getattr(api, method)
    args = ({"value": "hacked"},) if method == "patch" else ()
    foreign = call(f"/memory/facts/{theirs.pk}", *args)
    unknown = call("/memory/facts/999999", *args)
    malformed = call("/memory/facts/abc", *args)
    assert foreign.status_code == unknown.status_code == malformed.status_code == 404
    assert foreign.json()["detail"] == f"Memory fact {theirs.pk} not found."
    assert MemoryFact.objects.get(pk=theirs.pk).value == "Emacs"


def test_listing_and_search_never_show_another_users_facts(other_api: Any, mine: list[MemoryFact]) -> None:
    assert other_api.get("/memory/facts").json()["total"] == 0
    assert other_api.get("/memory/facts", data={"q": "neovim editor"}).json()["items"] == []


def test_summary(api: Any, user: Any, mine: list[MemoryFact]) -> None:
    assert api.get("/memory/summary").json() == {"summary": "", "updated_at": None, "fact_count": 3}
    MemorySummary.objects.create(user=user, text="Alice likes Neovim.")
    body = api.get("/memory/summary").json()
    assert body["summary"] == "Alice likes Neovim." and body["fact_count"] == 3


def test_authentication_required(client: Any) -> None:
    assert client.get("/memory/facts").status_code == 401


def test_facts_carry_their_provenance(api: Any, user: Any) -> None:
    from sessions_app.services import message_append, session_create, session_update

    session = session_create(owner=user)
    session_update(session=session, title="School plans")
    said = message_append(session_id=session.id, role="user", content="My daughter   Mia starts school\nin September.")
    message_append(session_id=session.id, role="assistant", content="Lovely.")
    fact = MemoryFact.objects.create(user=user, category="people", key="daughter_name", value="Mia",
                                     source_session=session, source_message=said)
    unknown = MemoryFact.objects.create(user=user, category="other", key="hobby", value="chess")

    items = {f["key"]: f for f in api.get("/memory/facts").json()["items"]}
    assert items["daughter_name"]["source"] == {
        "session_id": str(session.id), "session_title": "School plans", "message_seq": said.seq,
        "message_role": "user", "excerpt": "My daughter Mia starts school in September.",
        "stated_at": items["daughter_name"]["source"]["stated_at"],
    }
    assert items["hobby"]["source"] is None
    assert api.get(f"/memory/facts/{fact.pk}").json()["source"]["message_seq"] == said.seq
    assert api.get("/memory/facts", data={"q": "daughter"}).json()["items"][0]["source"]["session_title"] == "School plans"

    session.delete()  # the conversation is gone: the fact stays, without a link
    assert api.get(f"/memory/facts/{fact.pk}").json()["source"] is None
    assert api.get(f"/memory/facts/{unknown.pk}").status_code == 200


def test_memory_page_needs_a_login_and_loads_its_script(client: Any, user: Any) -> None:
    anonymous = client.get("/memory/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    client.force_login(user)
    page = client.get("/memory/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "js/memory-page.js" in html and 'id="memory-groups"' in html
    assert client.get("/").content.decode().count('href="/memory/"') == 1  # the chat links to it
