"""/api/docs in real Chromium with every request to another host refused: Swagger UI still renders
the API from Navi's own files."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Route, expect

from tests.browser.conftest import Watched
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def test_docs_render_with_no_network_but_navi(watched: Watched, browser_navi: LiveNavi) -> None:
    page = watched.page
    outside: list[str] = []
    ours = urlsplit(browser_navi.url).netloc

    def offline(route: Route) -> None:
        if urlsplit(route.request.url).netloc == ours or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(browser_navi.url + "/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Navi API")
    expect(page.locator(".opblock-tag-section").first).to_be_visible()
    expect(page.locator(".opblock-tag", has_text="sessions")).to_be_visible()
    page.locator(".opblock-tag", has_text="sessions").click()
    expect(page.locator(".opblock-summary-path", has_text="/sessions/{session_id}").first).to_be_visible()
    assert outside == [], f"the docs page reached outside Navi: {outside}"
