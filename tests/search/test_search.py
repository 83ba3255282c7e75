"""Search across conversations (issue 22): GET /search in both tiers — ranking, snippets, the index
kept current by every writer, other users' sessions invisible, and bad queries refused clearly."""
from __future__ import annotations

import pytest

from sessions_app import services
from sessions_app.models import Message, Session
from sessions_app.search import search
from sessions_app.search.query import snippet, terms

pytestmark = pytest.mark.django_db


def _session(owner, title="", *messages):
    session = services.session_create(owner=owner, title=title)
    for role, content, *rest in messages:
        services.message_append(session_id=session.id, role=role, content=content, **(rest[0] if rest else {}))
    return session


def _marked(hit):
    """The snippet with its highlights in [brackets], as the UI renders them in <mark>."""
    text, out, last = hit["snippet"], [], 0
    for start, end in hit["highlights"]:
        out += [text[last:start], "[", text[start:end], "]"]
        last = end
    return "".join(out + [text[last:]])


def test_finds_user_assistant_and_tool_text_ranked_with_highlighted_snippets(api, user) -> None:
    backup = _session(user, "Server chores",
                      ("user", "How should we rotate the backup of the photo library?"),
                      ("assistant", "Keep seven daily backups and four weekly ones; the backup runs at 02:00."),
                      ("tool", "rsync: backup finished, 3 files", {"name": "terminal", "tool_call_id": "c1"}))
    _session(user, "Groceries", ("user", "Buy milk and bread"))
    body = api.get("/search?q=backup").json()
    results = body["results"]
    assert {r["role"] for r in results} == {"user", "assistant", "tool"}
    assert all(r["session_id"] == str(backup.id) and r["session_title"] == "Server chores" for r in results)
    assistant = next(r for r in results if r["role"] == "assistant")
    assert _marked(assistant) == "Keep seven daily [backups] and four weekly ones; the [backup] runs at 02:00."
    tool = next(r for r in results if r["role"] == "tool")
    assert tool["name"] == "terminal" and _marked(tool) == "rsync: [backup] finished, 3 files"
    assert body["terms"] == ["backup"] and body["has_more"] is False


def test_the_closest_match_ranks_first(api, user) -> None:
    _session(user, "", ("user", "a long note that mentions the garden once among many other words about the week"),
             ("user", "garden garden: the garden plan"),
             ("user", "something else entirely, nothing to see here, move along please"))
    results = api.get("/search?q=garden").json()["results"]
    assert [r["snippet"] for r in results] == [
        "garden garden: the garden plan",
        "a long note that mentions the garden once among many other words about the week"]
    assert results[0]["score"] > results[1]["score"]


def test_every_word_must_occur_and_titles_are_found(api, user) -> None:
    trip = _session(user, "Trip to Lisbon", ("user", "Book the train to Porto"))
    _session(user, "Work", ("user", "The train is late again"))
    body = api.get("/search?q=train porto").json()
    assert [r["session_id"] for r in body["results"]] == [str(trip.id)]
    titles = api.get("/search?q=lisbon").json()
    assert [(t["session_id"], t["title"], t["highlights"]) for t in titles["sessions"]] == [
        (str(trip.id), "Trip to Lisbon", [[8, 14]])]
    assert titles["results"] == []


def test_index_follows_renames_archives_deletes_and_hides_context_only_rows(api, user) -> None:
    session = _session(user, "Old name", ("user", "quarterly taxes question"),
                       ("assistant", "note for the model only", {"buffer": Message.Buffer.CONTEXT}))
    assert api.get("/search?q=model").json()["results"] == []  # not shown in the chat, not found
    services.session_update(session=session, title="Accountant")
    assert api.get("/search?q=old").json()["sessions"] == []
    assert [t["title"] for t in api.get("/search?q=accountant").json()["sessions"]] == ["Accountant"]
    services.session_regenerate(session_id=session.id, from_seq=1)  # the exchange is archived
    assert api.get("/search?q=quarterly").json()["results"] == []
    other = _session(user, "", ("user", "quarterly report"))
    services.session_delete(session=other)
    assert api.get("/search?q=quarterly").json()["results"] == []
    assert not Session.objects.filter(pk=other.pk).exists()


def test_messages_saved_by_recovery_are_searchable(api, user) -> None:
    """Durable turns: recovery turns a dead run's partial answer into a message; it is found."""
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app import turns
    from sessions_app.models import RunningTurn

    session = _session(user, "", ("user", "draft the newsletter", {"run_id": "r1"}))
    RunningTurn.objects.create(session=session, run_id="r1", owner="elsewhere:1:x",
                               alive_until=timezone.now() - timedelta(seconds=5),
                               partial_text="Here is a newsletter draft about zeppelins")
    turns.turns_recover()
    hits = api.get("/search?q=zeppelins").json()["results"]
    assert [(h["role"], h["session_id"]) for h in hits] == [("assistant", str(session.id))]


def test_other_users_sessions_are_never_found(api, other_api, user, other_user) -> None:
    _session(other_user, "Mallory's secret plans", ("user", "the secret plans for the heist"))
    _session(user, "", ("user", "no secrets here, just plans"))
    body = api.get("/search?q=heist").json()
    assert body == {"terms": ["heist"], "sessions": [], "results": [], "has_more": False}
    assert [t["title"] for t in other_api.get("/search?q=secret").json()["sessions"]] == ["Mallory's secret plans"]
    assert [r["snippet"] for r in api.get("/search?q=plans").json()["results"]] == ["no secrets here, just plans"]


@pytest.mark.parametrize("q", ['"backup', "backup*", "NEAR(backup photo)", "-backup", "(backup)", "backup:",
                               "content:backup", "backup OR", "AND backup NOT", "back^up", "'backup'", "backup\\",
                               "{backup}", "backup + photo", "[backup]", "backup;drop table x"])
def test_query_syntax_characters_are_plain_words(api, user, q) -> None:
    _session(user, "", ("user", "content: the backup (near the photo) or not, back up and drop table x"),
             ("user", "up and away"))
    resp = api.get("/search", data={"q": q})
    assert resp.status_code == 200, resp.content
    assert [r["snippet"] for r in resp.json()["results"]] == [
        "content: the backup (near the photo) or not, back up and drop table x"]


def test_operator_words_are_searched_as_words(api, user) -> None:
    _session(user, "", ("user", "stand near the door"), ("user", "not this one"))
    hits = api.get("/search?q=NEAR").json()["results"]
    assert [_marked(h) for h in hits] == ["stand [near] the door"]
    assert [_marked(h) for h in api.get("/search?q=NOT").json()["results"]] == ["[not] this one"]


@pytest.mark.parametrize("q", ["", "   ", "***", '""', "-", "()", ":"])
def test_empty_queries_get_a_clear_400(api, user, q) -> None:
    resp = api.get("/search", data={"q": q})
    assert resp.status_code == 400
    assert resp.json()["detail"] == "Type a word to search for: the search has no letters or digits in it."


def test_a_10000_character_query_gets_a_clear_400(api, user) -> None:
    resp = api.get("/search", data={"q": "x" * 10_000})
    assert resp.status_code == 400
    assert resp.json()["detail"] == "The search is too long (10000 characters): use at most 500."


def test_paging_and_limits(api, user) -> None:
    _session(user, "", *[("user", f"kiwi number {i}") for i in range(7)])
    first = api.get("/search?q=kiwi&limit=5").json()
    second = api.get("/search?q=kiwi&limit=5&offset=5").json()
    assert len(first["results"]) == 5 and first["has_more"] is True
    assert len(second["results"]) == 2 and second["has_more"] is False
    assert {r["seq"] for r in first["results"]} | {r["seq"] for r in second["results"]} == set(range(1, 8))
    assert api.get("/search?q=kiwi&limit=500").status_code == 422


def test_unauthenticated_search_is_refused(client) -> None:
    assert client.get("/search?q=x").status_code == 401


def test_unicode_and_diacritics(user) -> None:
    _session(user, "Café", ("user", "Ein schönes Häuschen am See"), ("user", "naïve résumé"))
    assert [h.snippet.text for h in search(user_id=user.pk, q="häuschen").messages] == ["Ein schönes Häuschen am See"]
    assert [t.title for t in search(user_id=user.pk, q="café").sessions] == ["Café"]


def test_terms_and_snippet_are_pure() -> None:
    assert terms('"Backup" NEAR(photo*) -x:y backup') == ["backup", "near", "photo", "x", "y"]
    long = "word " * 100 + "the needle is here " + "word " * 100
    snip = snippet(long, ["needle"])
    assert "needle" in snip.text and snip.text.startswith("…") and snip.text.endswith("…")
    assert len(snip.text) <= 182
    (start, end), = snip.highlights
    assert snip.text[start:end] == "needle"


@pytest.mark.embedded_only
def test_a_migration_that_rebuilds_the_message_table_cannot_leave_search_stale(user) -> None:
    """SQLite rebuilds a table to alter it and its triggers go with it; after migrate the
    post_migrate repair puts them back and re-indexes what was written meanwhile."""
    from django.db import connection

    from sessions_app.apps import _repair_search_index

    session = _session(user, "", ("user", "written before the rebuild: aardvark"))
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER sessions_app_message_fts_ai")
    services.message_append(session_id=session.id, role="user", content="written while stale: bandicoot")
    assert [h.seq for h in search(user_id=user.pk, q="bandicoot").messages] == []
    _repair_search_index(using="default")
    assert [h.seq for h in search(user_id=user.pk, q="bandicoot").messages] == [2]
    assert [h.seq for h in search(user_id=user.pk, q="aardvark").messages] == [1]
    services.message_append(session_id=session.id, role="user", content="written after: capybara")
    assert [h.seq for h in search(user_id=user.pk, q="capybara").messages] == [3]


def test_a_common_word_ranks_the_newest_matches_and_pages_through_every_match_once(api, user) -> None:
    """Only the newest RANKED_WINDOW matches are ranked (a word in thousands of messages costs what a
    rare one does); older matches follow newest first, and paging neither repeats nor skips one."""
    from sessions_app.search.ranking import RANKED_WINDOW

    session = _session(user, "")
    Message.objects.bulk_create([  # the oldest is the best match by far, but lies outside the window
        Message(session=session, seq=1, role="user", content="kumquat " * 10),
        *[Message(session=session, seq=seq, role="assistant", content=f"filler words {seq} then kumquat once")
          for seq in range(2, RANKED_WINDOW + 31)]])
    first = api.get("/search?q=kumquat&limit=50").json()
    assert first["has_more"] is True and 1 not in [r["seq"] for r in first["results"]]
    seen: list[int] = []
    for offset in range(0, RANKED_WINDOW + 30, 50):
        page = api.get(f"/search?q=kumquat&limit=50&offset={offset}").json()
        seen += [r["seq"] for r in page["results"]]
    assert sorted(seen) == list(range(1, RANKED_WINDOW + 31))
    assert seen[-1] == 1  # the oldest match comes last, after the ranked window
    assert page["has_more"] is False


def test_short_words_match_whole_words_longer_ones_match_prefixes(user) -> None:
    _session(user, "", ("user", "ok, the db is fine"), ("user", "okay, the dbase backups are done"))
    assert [h.snippet.text for h in search(user_id=user.pk, q="ok").messages] == ["ok, the db is fine"]
    assert [h.snippet.text for h in search(user_id=user.pk, q="db").messages] == ["ok, the db is fine"]
    found = search(user_id=user.pk, q="oka bac").messages
    assert [h.snippet.text for h in found] == ["okay, the dbase backups are done"]
    text = found[0].snippet.text
    assert [text[s:e] for s, e in found[0].snippet.highlights] == ["okay", "backups"]


def test_window_pages_cover_each_position_once() -> None:
    from sessions_app.search.ranking import Page, pages

    assert pages(limit=20, offset=0, window=500) == [Page(True, 20, 0)]
    assert pages(limit=50, offset=480, window=500) == [Page(True, 20, 480), Page(False, 30, 500)]
    assert pages(limit=21, offset=600, window=500) == [Page(False, 21, 600)]
