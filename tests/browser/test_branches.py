"""Issue 22 in the browser: edit the last message, regenerate the last answer, and switch between the
versions of the exchange with "‹ 1/2 ›" (the old branch is kept and can be viewed)."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, create_session
from tests.browser.test_chat import last_answer, send, wait_idle
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def test_edit_the_last_message_then_switch_between_the_versions(
        watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Edit and branches")
    page = watched.open(sid)
    fake.script(text="Paris is the capital of France.")
    send(page, "What is the capital of France?")
    expect(last_answer(page)).to_have_text("Paris is the capital of France.")
    wait_idle(page)

    user = page.locator(".msg.user").last
    user.get_by_role("button", name="Edit").click()
    box = user.get_by_role("textbox", name="Edit your message")
    expect(box).to_have_value("What is the capital of France?")
    box.fill("What is the capital of Italy?")
    fake.script(text="Rome is the capital of Italy.")
    user.get_by_role("button", name="Save & send").click()
    expect(last_answer(page)).to_have_text("Rome is the capital of Italy.")
    wait_idle(page)
    expect(page.locator(".msg.user")).to_have_count(1)
    user = page.locator(".msg.user").last
    expect(user.locator(".user-text")).to_have_text("What is the capital of Italy?")
    switch = user.locator(".branch-switch")
    expect(switch.locator(".branch-pos")).to_have_text("2/2")

    # The old version is still there: ‹ shows it, read-only, with a note; › comes back.
    switch.get_by_role("button", name="Previous version").click()
    expect(page.locator(".msg.user .user-text")).to_have_text("What is the capital of France?")
    expect(last_answer(page)).to_have_text("Paris is the capital of France.")
    expect(page.locator(".msg.user .branch-pos")).to_have_text("1/2")
    expect(page.locator(".branch-viewing")).to_contain_text("viewing version 1 of 2")
    expect(page.locator("#messages").get_by_role("button", name="Edit")).to_have_count(0)
    page.locator(".msg.user").get_by_role("button", name="Next version").click()
    expect(page.locator(".msg.user .user-text")).to_have_text("What is the capital of Italy?")
    expect(last_answer(page)).to_have_text("Rome is the capital of Italy.")
    expect(page.locator(".branch-viewing")).to_have_count(0)

    # Regenerate the last answer: a third version, and the switcher survives a reload.
    fake.script(text="Rome, since 1871.")
    page.locator(".msg.assistant").last.get_by_role("button", name="Regenerate").click()
    expect(last_answer(page)).to_have_text("Rome, since 1871.")
    wait_idle(page)
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator(".msg.user .branch-pos")).to_have_text("3/3")
    page.locator(".msg.user").get_by_role("button", name="Previous version").click()
    expect(last_answer(page)).to_have_text("Rome is the capital of Italy.")
    expect(page.locator(".msg.user .branch-pos")).to_have_text("2/3")
    page.locator(".msg.user").get_by_role("button", name="Previous version").click()
    expect(last_answer(page)).to_have_text("Paris is the capital of France.")
    expect(page.locator(".msg.user").get_by_role("button", name="Previous version")).to_be_disabled()


def test_editing_to_an_empty_message_is_refused_in_place(
        watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Edit refused")
    page = watched.open(sid)
    fake.script(text="Hello there.")
    send(page, "Hi")
    expect(last_answer(page)).to_have_text("Hello there.")
    wait_idle(page)
    user = page.locator(".msg.user").last
    user.get_by_role("button", name="Edit").click()
    user.get_by_role("textbox", name="Edit your message").fill("   ")
    user.get_by_role("button", name="Save & send").click()
    expect(page.locator(".toast")).to_contain_text("The edited message is empty")
    user.get_by_role("button", name="Cancel").click()
    expect(user.locator(".user-text")).to_have_text("Hi")
    expect(last_answer(page)).to_have_text("Hello there.")
    assert browser_navi.request("GET", f"/sessions/{sid}")[1]["messages"][0]["content"] == "Hi"
