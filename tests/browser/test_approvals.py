"""The approval card in real Chromium: approve from one tab and deny from another (issue 20)."""
from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, create_session
from tests.browser.test_chat import last_answer, send, wait_idle
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def test_approve_and_deny_from_the_card(watched: Watched, new_page: Any, browser_navi: LiveNavi,
                                        fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Approvals", profile_id="server_admin")
    first = watched.open(sid)
    second = new_page().open(sid)

    fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo disk-ok"}}])
    # The answer takes a moment (as a model's does): both tabs show the settled card while the turn
    # still runs. When it ends, a tab that did not send the message re-reads the history, which has
    # the tool's result but no card; checking after that would race the end of the turn.
    fake.script(text="The disk is fine.", hang_before_first_chunk=3.0)
    send(first, "check the disk")
    for page in (first, second):  # every tab shows the card; the turn waits
        card = page.locator(".approval-card[data-state=pending]")
        expect(card).to_be_visible()
        expect(card.locator(".approval-head code")).to_have_text("terminal")
        expect(card.locator(".approval-reason")).to_have_text("Runs a program on the Navi server.")
        expect(card.locator(".approval-touches code")).to_have_text("`echo disk-ok`")
        expect(page.locator(".tool-card[data-tool=terminal][data-state=pending]")).to_have_count(1)
    second.get_by_role("button", name="Approve once").click()
    for page in (first, second):
        expect(page.locator(".approval-card .approval-status")).to_have_text("Approved once by livetester.")
        expect(page.locator(".approval-card button")).to_have_count(0)
    for page in (first, second):
        expect(last_answer(page)).to_have_text("The disk is fine.")
        expect(page.locator(".tool-card[data-tool=terminal][data-state=ok]")).to_have_count(1)
    wait_idle(first)
    wait_idle(second)
    first.locator(".tool-card[data-tool=terminal] summary").click()
    expect(first.locator(".tool-card[data-tool=terminal] .tool-section.result pre")).to_contain_text("disk-ok")

    fake.script(tool_calls=[{"name": "terminal", "arguments": {"command": "echo never-run"}}])
    fake.script(text="Understood, I left it.")
    send(first, "and now this one")
    card = first.locator(".approval-card[data-state=pending]")
    expect(card).to_be_visible()
    expect(second.locator(".approval-card[data-state=pending]")).to_be_visible()
    card.get_by_label("Reason for Navi (optional)").fill("not today")
    card.get_by_role("button", name="Deny").click()
    for page in (first, second):
        expect(page.locator(".approval-card[data-state=denied] .approval-status")).to_have_text(
            "Denied by livetester: not today.")
        expect(last_answer(page)).to_have_text("Understood, I left it.")
    failed = first.locator(".tool-card[data-tool=terminal][data-state=fail]")
    expect(failed).to_have_count(1)
    failed.locator("summary").click()
    expect(failed.locator(".tool-section.result pre")).to_contain_text("Not run: the user denied this terminal call. "
                                                                       "Their reason: not today")
    status, audit = browser_navi.request("GET", f"/audit?session_id={sid}")
    assert status == 200 and [e["decision"] for e in audit["items"]] == ["denied", "approved"]
