"""Issue 21 in the browser: an unfinished turn (crash, model error) stays in the history with
"Continue" and "Regenerate", and a plan's steps show in the todo panel without a todo tool call."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SideReplies, Watched, create_session, seed_messages
from tests.browser.test_chat import last_answer, send, wait_idle
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser

PARTIAL = "Part one of the answer is here, and part two was about to"


def test_a_model_error_keeps_its_partial_answer_and_regenerate_answers_again(
        watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Error mid-stream")
    page = watched.open(sid)
    fake.script(text=PARTIAL + " follow.", token_size=8, drop_after_chunks=6)
    send(page, "Tell me a long story")
    expect(page.locator(".error-card")).to_be_visible(timeout=30000)
    wait_idle(page)
    page.reload()
    page.wait_for_selector("body.ready")
    answer = last_answer(page)
    expect(answer).to_contain_text("Part one of the answer")
    expect(page.locator(".error-card")).to_have_count(1)
    regenerate = page.locator(".turn-actions").get_by_role("button", name="Regenerate")
    expect(regenerate).to_be_visible()
    fake.script(text="A complete answer this time.")
    regenerate.click()
    expect(last_answer(page)).to_have_text("A complete answer this time.")
    wait_idle(page)
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator(".msg.user")).to_have_count(1)  # answered again, not asked twice
    expect(page.locator(".msg.user").first).to_contain_text("Tell me a long story")
    expect(page.locator(".error-card")).to_have_count(0)
    expect(last_answer(page)).to_have_text("A complete answer this time.")


def test_an_interrupted_turn_offers_continue(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Interrupted")
    seed_messages(browser_navi, sid, [
        {"role": "user", "content": "Write the report", "interrupted": True},
        {"role": "assistant", "content": PARTIAL, "interrupted": True, "metadata": {"interrupted": True}},
    ])
    page = watched.open(sid)
    expect(page.locator(".interrupted")).to_contain_text("Interrupted")
    actions = page.locator(".turn-actions")
    expect(actions.get_by_role("button", name="Regenerate")).to_be_visible()
    fake.script(text="...follow, and that is the end.")
    actions.get_by_role("button", name="Continue").click()
    expect(last_answer(page)).to_have_text("...follow, and that is the end.")
    expect(page.locator(".msg.user").last).to_contain_text("Continue where you left off.")
    wait_idle(page)
    expect(page.locator(".turn-actions")).to_have_count(0)  # only under an unfinished last turn
    context = browser_navi.request("GET", f"/sessions/{sid}/context")[1]["messages"]
    assert [m["role"] for m in context] == ["user", "assistant", "user", "assistant"]
    assert context[1]["content"] == PARTIAL  # the model saw where it had stopped


def test_a_plan_fills_the_todo_panel(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer,
                                     side_replies: SideReplies) -> None:
    sid = create_session(browser_navi, "Plan to todo")
    page = watched.open(sid)
    side_replies.plans.append("1. Gather the facts\n2. Write the summary")
    fake.script(text="Here is the summary.", delay_between_chunks=0.05)
    send(page, "Research and summarise the topic in depth")
    panel = page.locator("#todo-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(".todo-count")).to_have_text("0/2")
    expect(panel.locator(".todo-title")).to_have_text(["Gather the facts", "Write the summary"])
    wait_idle(page)
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator("#todo-panel .todo-title")).to_have_count(2)
