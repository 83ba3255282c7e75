"""The model picker in real Chromium against the fake Ollama: the servers' models with size and capabilities,
choosing one for the chat (kept on reload, used for the next turn), and a staff pull with a progress bar
(bytes and percent) that finishes, one that is cancelled (the fake server sees the connection close) and
ones that fail plainly (no such model, a name with spaces)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Watched, create_session
from tests.browser.test_chat import send, wait_idle
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def _models(fake: FakeLLMServer) -> None:
    fake.add_model("qwen3:4b", size=2_497_293_918, parameter_size="4.0B", quantization="Q4_K_M", family="qwen3",
                   capabilities=["completion", "tools", "thinking"])
    fake.add_model("llava:7b", size=4_733_363_377, parameter_size="7B", quantization="Q4_0", family="llama",
                   capabilities=["completion", "vision"])


def _open_menu(page: Page) -> None:
    page.click("#model-button")
    expect(page.locator("#model-menu")).to_be_visible()
    expect(page.locator("#model-menu .model-server").first).to_be_visible()


def test_pick_a_model_for_the_chat(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    _models(fake)
    sid = create_session(browser_navi, "Models")
    page = watched.open(sid)
    button = page.locator("#model-button")
    expect(button).to_be_visible()
    default = browser_navi.request("GET", f"/sessions/{sid}")[1]["model"]
    expect(page.locator("#model-label")).to_have_text(default)
    expect(button).to_have_attribute("data-source", re.compile("profile|default"))

    _open_menu(page)
    ollama = page.locator(".model-server[data-backend=ollama]")
    expect(ollama.locator(".model-name")).to_have_text(["llava:7b", "qwen3:4b"])
    qwen = ollama.locator(".model-option[data-model='qwen3:4b']")
    expect(qwen.locator(".model-size")).to_have_text("2.50 GB")
    expect(qwen.locator(".model-meta")).to_contain_text("4.0B · Q4_K_M")
    expect(qwen.locator(".model-cap:not(.is-off)")).to_have_text(["tools", "thinking"])
    llava = ollama.locator(".model-option[data-model='llava:7b']")
    expect(llava.locator(".model-size")).to_have_text("4.73 GB")
    expect(llava.locator(".model-cap:not(.is-off)")).to_have_text(["vision"])
    expect(page.locator(".model-server[data-backend=openai] .model-cap.is-unknown").first).to_have_text(
        "capabilities not reported")

    llava.click()
    expect(page.locator("#model-menu")).to_be_hidden()
    expect(page.locator("#model-label")).to_have_text("llava:7b")
    expect(button).to_have_attribute("data-source", "session")
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator("#model-label")).to_have_text("llava:7b")  # kept on the session

    fake.script(text="Hello from llava.")
    send(page, "Which model are you?")
    wait_idle(page)
    expect(page.locator(".msg.assistant .answer").last).to_have_text("Hello from llava.")
    assert [r.json["model"] for r in fake.chat_requests if r.json.get("stream", True)][-1] == "llava:7b"

    _open_menu(page)
    expect(page.locator(".model-option[aria-checked=true]")).to_have_attribute("data-model", "llava:7b")
    page.click("[data-action=profile-default]")
    expect(page.locator("#model-label")).to_have_text(default)
    assert browser_navi.request("GET", f"/sessions/{sid}/model")[1]["model_source"] != "session"


def test_pull_with_progress_cancel_and_errors(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    watched.allow(r"HTTP 400 .*/models/pull|status of 400")  # the name with spaces
    _models(fake)
    fake.script_pull("tinyllama:1.1b", layers=[("sha256:" + "1" * 64, 1_100_000_000), ("sha256:" + "2" * 64, 500)],
                     steps=10, delay=0.25)
    sid = create_session(browser_navi, "Pulling")
    page = watched.open(sid)
    _open_menu(page)
    form = page.locator(".model-pull")
    form.locator("input").fill("tinyllama:1.1b")
    form.locator("[data-action=pull]").click()
    status = page.locator("#pull-status")
    expect(status).to_have_attribute("data-state", "running")
    expect(status.locator(".pull-text")).to_have_text(re.compile(r"^[\d.]+ (MB|GB) of 1\.10 GB \(\d{1,2}\.\d%\)$"))
    now = int(status.locator(".pull-bar").get_attribute("aria-valuenow") or "0")
    assert 0 < now < 100
    expect(status).to_have_attribute("data-state", "done", timeout=20000)
    expect(status.locator(".pull-text")).to_have_text("Pulled tinyllama:1.1b. It is in the list now.")
    expect(page.locator(".model-server[data-backend=ollama] .model-option[data-model='tinyllama:1.1b']")).to_be_visible()

    # Cancel: the bar stops and Navi closes its connection to the model server.
    fake.script_pull("big:70b", layers=[("sha256:" + "3" * 64, 40_000_000_000)], steps=200, delay=0.2)
    form.locator("input").fill("big:70b")
    form.locator("[data-action=pull]").click()
    expect(status.locator(".pull-text")).to_have_text(re.compile(r" of 40\.0 GB "))
    status.locator("[data-action=cancel-pull]").click()
    expect(status).to_have_attribute("data-state", "cancelled")
    expect(status.locator(".pull-text")).to_contain_text("Cancelled.")
    assert fake.wait_for_sync(lambda f: f.pulls_cancelled == 1, within=10)

    # Errors, plainly: a model the registry does not have; a name with spaces (refused before any pull).
    form.locator("input").fill("nosuch:1b")
    form.locator("[data-action=pull]").click()
    expect(status).to_have_attribute("data-state", "error")
    expect(status.locator(".pull-text[role=alert]")).to_contain_text("Ollama has no model called 'nosuch:1b'.")
    form.locator("input").fill("qwen3 4b")
    form.locator("[data-action=pull]").click()
    expect(status).to_have_attribute("data-state", "error")
    expect(status.locator(".pull-text")).to_contain_text("'qwen3 4b' contains spaces")
    assert [r.json["model"] for r in fake.requests if r.path == "/api/pull"] == ["tinyllama:1.1b", "big:70b", "nosuch:1b"]
