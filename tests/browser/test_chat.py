"""The browser chat client in real Chromium against a live Navi (fake Ollama behind it)."""
from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import SideReplies, Watched, create_session, django_shell, seed_messages
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser

PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
XSS = [
    "<img src=x onerror=\"window.__pwned=1;alert(1)\">",
    "[click me](javascript:window.__pwned=1)",
    "<a href=\"javascript:window.__pwned=1\">raw link</a>",
    "<script>window.__pwned=1</script>",
    "<svg onload=\"window.__pwned=1\"><circle r=5 /></svg>",
    "<iframe src=\"javascript:window.__pwned=1\"></iframe>",
    "<div style=\"background:url(javascript:window.__pwned=1)\" onclick=\"window.__pwned=1\">raw html</div>",
    "<details open ontoggle=\"window.__pwned=1\"><summary>x</summary></details>",
]
XSS_TEXT = "\n\n".join(XSS)


def send(page: Page, text: str) -> None:
    box = page.locator("#composer-input")
    expect(box).to_be_enabled()
    box.fill(text)
    box.press("Enter")


def wait_idle(page: Page, timeout: float = 20000) -> None:
    page.wait_for_function("() => window.__navi && !window.__navi.store.busy", timeout=timeout)


def last_answer(page: Page) -> Any:
    return page.locator(".msg.assistant .answer").last


def assert_no_injection(page: Page) -> None:
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("#messages script, #messages iframe, #messages svg:not(.icon)").count() == 0
    assert page.evaluate(
        "() => [...document.querySelectorAll('#messages *')].filter(n => [...n.attributes]"
        ".some(a => a.name.startsWith('on') || /javascript:/i.test(a.value))).length"
    ) == 0


# -- pages, login, sidebar --------------------------------------------------------------------


def test_login_empty_state_and_new_session(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    page = watched.open()
    expect(page.locator("#empty-state")).to_be_visible()
    chips = page.locator("#profile-picker .profile-chip")
    expect(chips).to_have_count(3)
    chips.filter(has_text="Server Administrator").click()
    expect(page.locator("#chat-profile")).to_have_text("Server Administrator")
    fake.script(text="Hi! I am **Navi**.")
    send(page, "hello there")
    expect(last_answer(page).locator("strong")).to_have_text("Navi")
    wait_idle(page)
    session_id = page.evaluate("() => window.__navi.store.currentId")
    assert page.url.endswith("#" + session_id)
    status, data = browser_navi.request("GET", f"/sessions/{session_id}")
    assert data["profile_id"] == "server_admin"
    item = page.locator(f"#session-list li[data-id='{session_id}']")
    expect(item).to_be_visible()
    expect(page.locator("#context-meter")).to_be_visible()
    expect(page.locator("#composer-input")).to_be_enabled()


def test_slow_history_read_from_before_the_turn_keeps_the_answer(watched: Watched, browser_navi: LiveNavi,
                                                                   fake: FakeLLMServer) -> None:
    """Opening a conversation reloads its history once the socket is live; on a busy server that read
    can be answered after a whole turn has streamed. What it read (no answer yet) must not replace
    the answer on screen."""
    sid = create_session(browser_navi, "Slow history")
    reads: list[Any] = []

    def hold_the_reload(route: Any) -> None:
        reads.append(route)  # the first read is open()'s own; the second, the reload on connect, is held
        if len(reads) != 2:
            route.continue_()

    page = watched.page
    page.route(re.compile(rf".*/sessions/{sid}\?limit=200.*"), hold_the_reload)
    watched.open(sid)
    for _ in range(200):  # the reload began before anything was sent
        if len(reads) >= 2:
            break
        page.wait_for_timeout(50)
    assert len(reads) >= 2, "the history reload on connect was never made"
    fake.script(text="The answer is **forty-two**.")
    send(page, "what is the answer?")
    expect(last_answer(page).locator("strong")).to_have_text("forty-two")
    wait_idle(page)
    held = reads[1]
    stale = held.fetch()
    body = stale.json()
    body["messages"], body["busy"] = [], False  # as it was read: before anything was sent
    held.fulfill(response=stale, json=body)
    page.evaluate("() => new Promise((done) => setTimeout(done, 300))")
    expect(last_answer(page).locator("strong")).to_have_text("forty-two")
    expect(page.locator("#messages .msg.user")).to_have_count(1)
    page.reload()
    expect(last_answer(page).locator("strong")).to_have_text("forty-two")


def test_sidebar_order_pin_rename_delete_search(watched: Watched, browser_navi: LiveNavi) -> None:
    older = create_session(browser_navi, "Alpha groceries")
    newer = create_session(browser_navi, "Beta server logs")
    page = watched.open()
    titles = page.locator("#session-list .session-title")
    expect(titles.first).to_have_text("Beta server logs")
    # Pin the older one: pinned first.
    page.locator(f"li[data-id='{older}'] .session-more").click()
    page.get_by_role("menuitem", name="Pin").click()
    expect(titles.first).to_have_text("Alpha groceries")
    expect(page.locator(f"li[data-id='{older}'] .badge-icon.pin")).to_be_visible()
    # Rename through the dialog.
    page.locator(f"li[data-id='{newer}'] .session-more").click()
    page.get_by_role("menuitem", name="Rename").click()
    dialog = page.locator("dialog.modal")
    dialog.locator("input").fill("Gamma renamed")
    dialog.get_by_role("button", name="Save").click()
    expect(page.locator(f"li[data-id='{newer}'] .session-title")).to_have_text("Gamma renamed")
    # The search box finds titles (and messages: test_search.py); emptied, the list comes back.
    page.fill("#session-search", "gamma")
    expect(page.locator("#search-results .title-hit")).to_have_count(1)
    expect(page.locator("#session-list")).to_be_hidden()
    page.fill("#session-search", "")
    expect(page.locator(f"li[data-id='{older}']")).to_be_visible()
    # Delete asks first; Cancel keeps it, Delete removes it.
    page.locator(f"li[data-id='{newer}'] .session-more").click()
    page.get_by_role("menuitem", name="Delete").click()
    page.locator("dialog.modal").get_by_role("button", name="Cancel").click()
    expect(page.locator(f"li[data-id='{newer}']")).to_be_visible()
    page.locator(f"li[data-id='{newer}'] .session-more").click()
    page.get_by_role("menuitem", name="Delete").click()
    page.locator("dialog.modal").get_by_role("button", name="Delete").click()
    expect(page.locator(f"li[data-id='{newer}']")).to_have_count(0)
    assert browser_navi.request("GET", f"/sessions/{newer}")[0] == 404
    # Every icon-only button is labelled.
    unlabelled = page.evaluate(
        "() => [...document.querySelectorAll('button')].filter(b => !b.textContent.trim() && !b.getAttribute('aria-label'))"
        ".map(b => b.outerHTML)"
    )
    assert unlabelled == []


# -- streaming turns -----------------------------------------------------------------------------


def test_plain_turn_with_thinking(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Thinking turn")
    page = watched.open(sid)
    fake.script(thinking="Let me think about the question carefully. " * 4, text="The answer is **42**.\n\n```python\nprint(42)\n```",
                delay_between_chunks=0.02)
    send(page, "What is the answer?")
    thinking = page.locator(".msg.assistant .thinking").first
    expect(thinking).to_be_visible()
    expect(last_answer(page).locator("strong")).to_have_text("42")
    wait_idle(page)
    expect(thinking).not_to_have_attribute("open", "")
    expect(thinking.locator(".thinking-label")).to_contain_text("Thought for")
    expect(page.locator(".code-block .copy-btn")).to_have_count(1)
    expect(page.locator(".code-block code.hljs .hljs-built_in, .code-block code.hljs span").first).to_be_visible()
    expect(page.locator(".msg.user .user-text").last).to_have_text("What is the answer?")


def test_turn_with_tools_and_todo(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Tools turn")
    page = watched.open(sid)
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "set", "steps": ["Look around", "Report"]}}])
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "update", "step": 1, "status": "done",
                                                            "validation": "looked"}}])
    fake.script(text="All done.")
    send(page, "Make a todo list and do it")
    expect(last_answer(page)).to_have_text("All done.")
    wait_idle(page)
    cards = page.locator(".msg.assistant .tool-card[data-tool=todo]")
    expect(cards).to_have_count(2)
    expect(page.locator(".tool-card[data-state=pending]")).to_have_count(0)
    expect(page.locator(".tool-card[data-state=ok]")).to_have_count(2)
    expect(page.locator("#todo-panel .todo-count")).to_have_text("1/2")
    cards.first.locator("summary").click()
    expect(cards.first.locator(".tool-section.result pre")).to_contain_text("Todo list")
    # History renders the same cards after a reload.
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator(".tool-card[data-tool=todo][data-state=ok]")).to_have_count(2)
    expect(page.locator("#todo-panel .todo-count")).to_have_text("1/2")


def test_planning_card_live_and_in_history(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer,
                                           side_replies: SideReplies) -> None:
    sid = create_session(browser_navi, "Planning turn")
    page = watched.open(sid)
    side_replies.plans.append("1. Gather the facts\n2. Write the summary")
    fake.script(text="Here is the summary.")
    send(page, "Research and summarise the topic in depth")
    card = page.locator(".plan-card")
    expect(card).to_have_count(1)
    expect(card.locator(".plan-body li")).to_have_count(2)
    expect(last_answer(page)).to_have_text("Here is the summary.")
    wait_idle(page)
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator(".plan-card .plan-body li")).to_have_count(2)


def test_subagent_events_nest_under_spawn_agent(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Subagent turn")
    page = watched.open(sid)
    fake.script(tool_calls=[{"name": "spawn_agent", "arguments": {"task": "Write a note in the scratchpad"}}])
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "set", "steps": ["Sub step"]}}],
                delay_between_chunks=0.05)
    fake.script(text="Subagent finished.", delay_between_chunks=0.05)
    fake.script(text="The subagent did it.")
    send(page, "Delegate this to a subagent")
    expect(last_answer(page)).to_have_text("The subagent did it.")
    wait_idle(page)
    spawn = page.locator(".tool-card[data-tool=spawn_agent]")
    expect(spawn).to_have_count(1)
    expect(spawn).to_have_attribute("data-state", "ok")
    nested = spawn.locator(".subagent-log .tool-card.sub")
    expect(nested).to_have_count(1)
    expect(nested).to_have_attribute("data-tool", "todo")
    # The subagent's todo list is its own: the session's panel is not touched by it.


def test_stop_mid_stream_with_escape(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Stop turn")
    page = watched.open(sid)
    fake.script(text="word " * 400, delay_between_chunks=0.05)
    send(page, "Talk for a long time")
    expect(last_answer(page)).to_contain_text("word")
    expect(page.locator("#stop-button")).to_be_visible()
    # The box stays open during a turn: what is typed now joins the turn (steering, test_steering.py).
    expect(page.locator("#composer-input")).to_have_attribute("placeholder", re.compile("add a message to this turn"))
    page.keyboard.press("Escape")
    wait_idle(page, timeout=15000)
    expect(page.locator(".notice", has_text="Stopped")).to_be_visible()
    expect(page.locator("#composer-input")).to_be_enabled()
    expect(page.locator("#send-button")).to_be_visible()


def test_reconnect_mid_turn_continues_without_duplicates(watched: Watched, browser_navi: LiveNavi,
                                                         fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Reconnect turn")
    page = watched.open(sid)
    words = [f"w{i}" for i in range(120)]
    expected = " ".join(words)
    fake.script(text=expected, token_size=4, delay_between_chunks=0.03)
    send(page, "Count for me")
    expect(last_answer(page)).to_contain_text("w5")
    page.evaluate("() => window.__navi.socket.ws.close()")
    expect(page.locator("#conn")).to_have_attribute("data-state", re.compile("reconnecting|connecting"))
    expect(page.locator("#conn")).to_have_attribute("data-state", "open", timeout=10000)
    expect(last_answer(page)).to_have_text(expected, timeout=20000)
    wait_idle(page)
    expect(page.locator(".msg.assistant .answer")).to_have_count(1)
    assert page.locator(".msg.assistant .answer").inner_text().strip() == expected


def test_two_tabs_on_one_session(watched: Watched, new_page: Any, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Two tabs")
    first = watched.open(sid)
    second = new_page().open(sid)
    fake.script(text="Both tabs see this.", delay_between_chunks=0.02)
    send(first, "Hello from tab one")
    expect(last_answer(second)).to_have_text("Both tabs see this.")
    expect(second.locator(".msg.user .user-text").last).to_have_text("Hello from tab one")
    wait_idle(first)
    wait_idle(second)
    expect(first.locator(".msg.assistant .answer")).to_have_count(1)
    expect(second.locator(".msg.assistant .answer")).to_have_count(1)


def test_upload_progress_limit_and_image_paste(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer,
                                              tmp_path: Any) -> None:
    sid = create_session(browser_navi, "Uploads")
    watched.allow(r"\b413\b")  # the deliberate too-large upload
    page = watched.open(sid)
    small = tmp_path / "notes.txt"
    small.write_text("some notes\n" * 50)
    big = tmp_path / "huge.bin"
    big.write_bytes(b"\0" * (1024 * 1024 + 200_000))
    page.set_input_files("#file-input", [str(small)])
    chip = page.locator(".file-attachment", has_text="notes.txt")
    expect(chip).not_to_have_class(re.compile("uploading"))
    expect(chip.locator(".attachment-status")).to_contain_text("B")
    page.set_input_files("#file-input", [str(big)])
    bad = page.locator(".file-attachment.error", has_text="huge.bin")
    expect(bad).to_be_visible()
    expect(bad.locator(".attachment-status")).to_contain_text(re.compile("large|limit|MB", re.I))
    bad.get_by_role("button", name=re.compile("Remove file")).click()
    expect(bad).to_have_count(0)
    # Paste an image into the box: previewed, removable, sent as bare base64.
    page.evaluate(
        """(b64) => {
            const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], 'pasted.png', {type: 'image/png'}));
            const box = document.getElementById('composer-input');
            box.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true}));
        }""",
        PNG_1PX,
    )
    expect(page.locator(".image-attachment img")).to_have_count(1)
    fake.script(text="I see a tiny image and your notes.")
    send(page, "Look at these")
    expect(last_answer(page)).to_have_text("I see a tiny image and your notes.")
    wait_idle(page)
    expect(page.locator(".attachments .attachment")).to_have_count(0)
    expect(page.locator(".msg.user .msg-images img")).to_have_count(1)
    chat = fake.chat_requests[-1].json
    user = [m for m in chat["messages"] if m.get("role") == "user"][-1]
    assert user.get("images") == [PNG_1PX]
    assert "notes.txt" in str(chat["messages"])


def test_profile_switch_updates_header(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Switch profile")
    page = watched.open(sid)
    expect(page.locator("#chat-profile")).to_have_text("Personal Secretary")
    fake.script(tool_calls=[{"name": "switch_profile", "arguments": {"profile_id": "server_admin"}}])
    fake.script(text="Switched.")
    send(page, "Switch to the server admin profile")
    expect(page.locator("#chat-profile")).to_have_text("Server Administrator")
    wait_idle(page)
    expect(page.locator(f"li[data-id='{sid}'] .session-profile")).to_have_text("Server Administrator")


# -- recalls -----------------------------------------------------------------------------------------


def schedule_recall(navi: LiveNavi, sid: str, call_type: str, when: str | None = None, interval: int | None = None) -> None:
    django_shell(navi, (
        "from sessions_app.models import Session\n"
        "from recall_app.services import recall_schedule\n"
        f"recall_schedule(session=Session.objects.get(pk={sid!r}), call_type={call_type!r}, when={when!r}, "
        f"interval_seconds={interval!r}, internal_comment='Check the build', "
        "additional_context_message='Read /tmp/build.log with filesystem and report errors.')\n"
    ))


def test_recall_banner_skip_and_cancel(watched: Watched, browser_navi: LiveNavi) -> None:
    sid = create_session(browser_navi, "Recall banner")
    schedule_recall(browser_navi, sid, "recurring", "2h", 3600)
    page = watched.open(sid)
    banner = page.locator("#recall-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("in 2 hours")
    expect(banner).to_contain_text("repeats every hour")
    expect(page.locator(f"li[data-id='{sid}'] .badge-icon.recall")).to_be_visible()
    page.click("#recall-filter")
    expect(page.locator("#session-list li")).to_have_count(1)
    banner.get_by_role("button", name="Skip next").click()
    expect(banner).to_contain_text("in 3 hours")
    banner.get_by_role("button", name="Cancel").click()
    expect(banner).to_be_hidden()
    expect(page.locator("#session-list li")).to_have_count(0)
    page.click("#recall-filter")
    expect(page.locator(f"li[data-id='{sid}'] .badge-icon.recall")).to_have_count(0)


def test_headless_recall_run_appears_live(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Headless run")
    page = watched.open(sid)
    fake.script(text="Recall work done: the build is green.", delay_between_chunks=0.02)
    schedule_recall(browser_navi, sid, "immediate")
    answer = page.locator(".msg.assistant .answer", has_text="the build is green")
    expect(answer).to_be_visible(timeout=20000)
    expect(page.locator(".msg.user.recall .recall-badge")).to_be_visible(timeout=10000)
    wait_idle(page)
    expect(page.locator("#recall-banner")).to_be_hidden()


# -- safety ---------------------------------------------------------------------------------------


def test_xss_in_history_never_executes(watched: Watched, browser_navi: LiveNavi) -> None:
    sid = create_session(browser_navi, "XSS history")
    seed_messages(browser_navi, sid, [
        {"role": "user", "content": XSS_TEXT},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "web_view", "arguments": {"url": XSS[0]}}]},
        {"role": "tool", "content": XSS_TEXT, "tool_call_id": "c1", "name": "web_view"},
        {"role": "assistant", "content": XSS_TEXT, "thinking": XSS[0]},
        {"role": "assistant", "content": "1. " + XSS[0] + "\n2. " + XSS[4], "is_plan": True},
    ])
    page = watched.open(sid)
    expect(page.locator(".msg.assistant .answer")).to_have_count(1)
    expect(page.locator(".msg.user .user-text")).to_contain_text("<img src=x")
    page.locator(".tool-card summary").click()
    expect(page.locator(".tool-card .tool-pre").last).to_contain_text("<svg onload")
    links = page.locator(".msg.assistant .answer a")
    for i in range(links.count()):
        href = links.nth(i).get_attribute("href") or ""
        assert not href.lower().startswith("javascript"), href
    for link in page.locator(".msg.assistant .answer a").all():
        link.click(modifiers=["Control"]) if link.get_attribute("href") else link.click()
    page.wait_for_timeout(300)
    assert_no_injection(page)


def test_xss_in_live_stream_never_executes(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "XSS live")
    page = watched.open(sid)
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "set", "steps": XSS}}])
    fake.script(text=XSS_TEXT + "\n\n[ok](https://example.invalid/)", thinking=XSS[4])
    send(page, XSS_TEXT)
    expect(page.locator(".msg.assistant .answer a", has_text="ok")).to_have_attribute("rel", "noopener noreferrer")
    wait_idle(page)
    expect(page.locator(".msg.assistant .answer a", has_text="ok")).to_have_attribute("target", "_blank")
    expect(page.locator("#todo-panel .todo-title").first).to_contain_text("<img src=x")
    page.wait_for_timeout(300)
    assert_no_injection(page)


class _Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's API
        type(self).hits.append(self.path)
        body = base64.b64decode(PNG_1PX)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def external_origin() -> Iterator[tuple[str, list[str]]]:
    _Recorder.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.hits
    server.shutdown()
    server.server_close()


def test_external_image_loads_only_on_click(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer,
                                             external_origin: tuple[str, list[str]]) -> None:
    origin, hits = external_origin
    sid = create_session(browser_navi, "External image")
    seed_messages(browser_navi, sid, [
        {"role": "user", "content": "show me"},
        {"role": "assistant", "content": f"History: ![leak]({origin}/history.png?secret=1)"},
    ])
    page = watched.open(sid)
    fake.script(text=f"Live: ![chart]({origin}/live.png?secret=2) and <img src=\"{origin}/raw.png?secret=3\">")
    send(page, "and now?")
    expect(last_answer(page)).to_contain_text("Live:")
    wait_idle(page)
    placeholders = page.locator(".img-placeholder")
    expect(placeholders).to_have_count(3)
    page.wait_for_timeout(500)
    assert hits == [], f"an external image was fetched before any click: {hits}"
    placeholders.first.click()
    expect(page.locator("img.external-img")).to_have_count(1)
    page.wait_for_function("() => document.querySelector('img.external-img').complete")
    assert hits == ["/history.png?secret=1"]


def test_error_event_is_actionable(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer) -> None:
    sid = create_session(browser_navi, "Error turn")
    page = watched.open(sid)
    fake.script(http_status=500, error="model exploded")
    fake.script(http_status=500, error="model exploded")
    fake.script(http_status=500, error="model exploded")
    send(page, "Trigger an error")
    card = page.locator(".error-card")
    expect(card).to_be_visible(timeout=30000)
    wait_idle(page)
    expect(page.locator("#composer-input")).to_be_enabled()
    fake.reset()
    fake.script(text="Recovered.")
    card.get_by_role("button", name="Retry").click()
    expect(last_answer(page)).to_have_text("Recovered.")
    expect(page.locator(".error-card")).to_have_count(0)
