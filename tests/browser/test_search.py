"""Search across conversations in real Chromium: type in the sidebar box, see the ranked hit with
its highlighted snippet, click it, and the conversation opens scrolled to that message."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, create_session, seed_messages
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def test_search_shows_highlighted_snippets_and_opens_the_session_at_the_message(
        watched: Watched, browser_navi: LiveNavi) -> None:
    target = create_session(browser_navi, "Holiday planning")
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"filler message number {i}"}
               for i in range(260)]
    # An old answer (seq 4: before the first page of 200) with markup that must stay text.
    history[3] = {"role": "assistant",
                  "content": "<img src=x onerror=\"window.__pwned=1\"> The ferry to Zanzibar leaves at 9."}
    seed_messages(browser_navi, target, history)
    current = create_session(browser_navi, "Something else")
    seed_messages(browser_navi, current, [{"role": "user", "content": "unrelated"}])
    page = watched.open(current)

    page.fill("#session-search", "zanzib ferry")
    hit = page.locator("#search-results .search-hit[data-seq='4']")
    expect(hit).to_be_visible()
    expect(hit.locator(".search-hit-title")).to_have_text("Holiday planning")
    expect(hit.locator(".search-snippet")).to_have_text(
        '<img src=x onerror="window.__pwned=1"> The ferry to Zanzibar leaves at 9.')
    expect(hit.locator("mark")).to_have_text(["ferry", "Zanzibar"])
    expect(hit.locator(".search-hit-meta")).to_contain_text("Navi")
    expect(page.locator("#search-results .search-hit")).to_have_count(1)
    expect(page.locator("#session-list")).to_be_hidden()

    hit.click()
    expect(page).to_have_url(re.compile(f"#{target}$"))
    message = page.locator("#messages [data-seq='4']")
    expect(message).to_have_class(re.compile(r"\bis-target\b"))
    expect(message).to_be_in_viewport()
    expect(message).to_contain_text("The ferry to Zanzibar leaves at 9.")
    assert page.locator("#messages img[src='x']").count() == 0

    # A query with nothing in it says so, without an error toast.
    page.fill("#session-search", "*** ()")
    expect(page.locator("#search-results .search-error")).to_have_text(
        "Type a word to search for: the search has no letters or digits in it.")
    watched.allow(r"HTTP 400 .*/search\?")
    watched.allow(r"status of 400")
    page.fill("#session-search", "")
    expect(page.locator("#session-list")).to_be_visible()
    expect(page.locator("#search-results")).to_be_hidden()
