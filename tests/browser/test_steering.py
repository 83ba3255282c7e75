"""Issue 22 in the browser: steer a running turn. A message typed while Navi works shows as pending
(in every tab), is taken up at the turn's next step and answered in order; it can be withdrawn
before that; Stop gives its text back in the message box."""
from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Watched, create_session
from tests.browser.test_chat import last_answer, send, wait_idle
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser

SLOW = "I am working through your request step by step. " * 6  # ~5 s at 7 characters / 0.1 s


def _type(page: Page, text: str) -> None:
    box = page.locator("#composer-input")
    expect(box).to_be_enabled()
    box.fill(text)
    box.press("Enter")


def _streaming(page: Page) -> None:
    expect(page.locator("#stop-button")).to_be_visible()
    expect(last_answer(page)).to_contain_text("I am working")


def test_a_message_sent_mid_turn_is_pending_then_taken_up(
        watched: Watched, new_page: Any, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Steering")
    page = watched.open(sid)
    other = new_page().open(sid)
    fake.script(text=SLOW, token_size=7, delay_between_chunks=0.1)
    fake.script(text="Sure: I added the dentist at 3 pm.")
    send(page, "Plan my afternoon")
    _streaming(page)

    _type(page, "Also add the dentist at 3 pm")
    expect(page.locator("#composer-input")).to_have_value("")
    pending = page.locator(".msg.pending-steer")
    expect(pending).to_have_count(1)
    expect(pending).to_contain_text("Also add the dentist at 3 pm")
    expect(pending.locator(".steer-state")).to_contain_text("Waiting")
    expect(other.locator(".msg.pending-steer")).to_contain_text("Also add the dentist at 3 pm")  # every tab

    # Taken up when the first answer is done: the message moves into the conversation, answered below it.
    expect(last_answer(page)).to_have_text("Sure: I added the dentist at 3 pm.", timeout=20000)
    expect(pending).to_have_count(0)
    expect(other.locator(".msg.pending-steer")).to_have_count(0)
    wait_idle(page)
    texts = page.locator("#messages .msg .user-text, #messages .msg .answer")
    expect(texts).to_have_text(["Plan my afternoon", SLOW.strip(), "Also add the dentist at 3 pm",
                                "Sure: I added the dentist at 3 pm."])
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator("#messages .msg .user-text, #messages .msg .answer")).to_have_text(
        ["Plan my afternoon", SLOW.strip(), "Also add the dentist at 3 pm", "Sure: I added the dentist at 3 pm."])
    history = browser_navi.request("GET", f"/sessions/{sid}")[1]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]


def test_a_pending_message_can_be_withdrawn(
        watched: Watched, new_page: Any, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Withdraw")
    page = watched.open(sid)
    other = new_page().open(sid)
    fake.script(text=SLOW, token_size=7, delay_between_chunks=0.1)
    send(page, "Write a summary")
    _streaming(page)
    _type(page, "Scratch that, use bullet points")
    expect(other.locator(".msg.pending-steer")).to_have_count(1)
    page.locator(".msg.pending-steer").get_by_role("button", name="Withdraw").click()
    expect(page.locator(".msg.pending-steer")).to_have_count(0)
    expect(other.locator(".msg.pending-steer")).to_have_count(0)  # withdrawn in every tab
    expect(last_answer(page)).to_have_text(SLOW.strip(), timeout=20000)
    wait_idle(page)
    history = browser_navi.request("GET", f"/sessions/{sid}")[1]["messages"]
    assert [m["content"] for m in history] == ["Write a summary", SLOW.strip()]
    assert not any("Scratch that" in str(r.json) for r in fake.chat_requests)  # the model never saw it


def test_stop_gives_the_pending_text_back(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Stop drops")
    page = watched.open(sid)
    fake.script(text=SLOW * 3, token_size=7, delay_between_chunks=0.1)
    send(page, "Draft the report")
    _streaming(page)
    _type(page, "Make it formal")
    expect(page.locator(".msg.pending-steer")).to_have_count(1)
    page.locator("#stop-button").click()
    expect(page.locator(".msg.pending-steer")).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("Make it formal")
    expect(page.locator(".toast")).to_contain_text("it is back in the message box")
    wait_idle(page)
    history = browser_navi.request("GET", f"/sessions/{sid}")[1]["messages"]
    assert "Make it formal" not in [m["content"] for m in history]
