"""Browser tier: real headless Chromium (Debian's /usr/bin/chromium) driven by Playwright against a live Navi.

The live Navi here is started like ``live_navi`` (the real ``manage.py start`` in a subprocess, fake Ollama),
plus a 1 MB upload limit so the size-limit error can be exercised with a small file.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer, shared_server
from tests.fakes.wire import Reply
from tests.support.live import LiveNavi, start_live_navi
from tests.support.users import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]

if not os.path.exists(CHROMIUM):  # pragma: no cover - depends on the machine
    pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)",
                allow_module_level=True)
try:
    from playwright.sync_api import BrowserContext, Page, sync_playwright
except ImportError:  # pragma: no cover
    pytest.skip("Playwright's Python package is not installed", allow_module_level=True)


# -- the fake model: side calls (planner, titles) answered apart from the scripted stream ------------


@dataclass
class SideReplies:
    """Answers for non-streaming calls (planning phases, session titles, summaries), so that
    the FIFO of scripted replies only feeds the streaming agent loop."""

    plans: deque[str] = field(default_factory=deque)

    def answer(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        if "planning module" in system:
            return "Goal: do what was asked.\nREFLECT: no" if self.plans else "DIRECT"
        if "Write the execution plan" in system:
            return self.plans.popleft() if self.plans else "DIRECT"
        if "short title" in system:
            first = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "Chat")
            words = re.sub(r"[^\w ]", "", str(first)).split()[:4]
            return " ".join(words).capitalize() or "Chat"
        return "DIRECT"


def _install_side_router(server: FakeLLMServer) -> SideReplies:
    side: SideReplies | None = getattr(server, "_browser_side", None)
    if side is not None:
        return side
    side = SideReplies()
    original = server._chat

    async def routed(ollama: bool, body: dict[str, Any], reader: Any, writer: Any, generation: int) -> None:
        if not body.get("stream", ollama):
            # The original pops its reply synchronously before its first await: no interleaving.
            server.replies.appendleft(Reply(text=side.answer(body)))
        await original(ollama, body, reader, writer, generation)

    server._chat = routed  # type: ignore[method-assign]
    server._browser_side = side  # type: ignore[attr-defined]
    return side


def _remove_side_router(server: FakeLLMServer) -> None:
    """The fake server is shared by the whole test session: give the other packages it back unpatched."""
    server.__dict__.pop("_chat", None)
    server.__dict__.pop("_browser_side", None)


@pytest.fixture(scope="package")
def browser_navi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveNavi]:
    fake = shared_server()
    _install_side_router(fake)
    try:
        live = start_live_navi(tmp_path_factory.mktemp("browser-live"), {
            "OLLAMA_HOST": fake.url, "OPENAI_BASE_URL": fake.url + "/v1", "SESSION_FILES_MAX_SIZE_MB": "1",
            "WEBPUSH_ALLOW_PRIVATE_ENDPOINTS": "true",  # the local push service of test_notify.py
        })
        yield live
        live.stop()
    finally:
        _remove_side_router(fake)


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    server = shared_server()
    side = _install_side_router(server)
    server.reset()
    side.plans.clear()
    yield server
    server.reset()
    side.plans.clear()


@pytest.fixture
def side_replies(fake: FakeLLMServer) -> SideReplies:
    return _install_side_router(fake)


# -- the browser ------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def browser_context(browser_navi: LiveNavi) -> Iterator[BrowserContext]:
    user_data = tempfile.mkdtemp(prefix="navi-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            user_data, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 860}, color_scheme="light",
        )
        context.set_default_timeout(15000)
        page = context.new_page()
        page.goto(browser_navi.url + "/")
        page.wait_for_url(re.compile(r"/login/"))
        page.fill("#id_username", browser_navi.username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_selector("body.ready")
        page.close()
        yield context
        context.close()
    shutil.rmtree(user_data, ignore_errors=True)


class Watched:
    """A page with its console errors, page errors and dialogs recorded."""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.frames: list[str] = []
        self.allowed: list[re.Pattern[str]] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        # Console messages do not name the URL of a failed load: record failing responses too.
        page.on("response", lambda r: r.status >= 400 and self.errors.append(f"HTTP {r.status} {r.url}"))
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: self.frames.append(str(f))))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)

    def allow(self, pattern: str) -> None:
        """Expect console errors matching ``pattern`` (e.g. the browser's log line for a deliberate 413)."""
        self.allowed.append(re.compile(pattern))

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]

    def open(self, session_id: str | None = None) -> Page:
        target = self.base + "/" + (f"#{session_id}" if session_id else "")
        if self.page.url == target:
            self.page.reload()  # a goto that only changes nothing (or the fragment) would not load the page
        else:
            self.page.goto(target)
        self.page.wait_for_selector("body.ready")
        if session_id:
            self.page.wait_for_function("() => window.__navi.socket && window.__navi.socket.isOpen")
        return self.page


@pytest.fixture
def watched(browser_context: BrowserContext, browser_navi: LiveNavi) -> Iterator[Watched]:
    page = browser_context.new_page()
    w = Watched(page, browser_navi.url)
    yield w
    pwned = page.evaluate("() => window.__pwned") if not page.is_closed() else None
    page.close()
    assert pwned is None, "injected script ran"
    assert not w.dialogs, f"a dialog fired: {w.dialogs}"
    assert not w.unexpected_errors(), f"console errors: {w.unexpected_errors()}"


@pytest.fixture
def new_page(browser_context: BrowserContext, browser_navi: LiveNavi) -> Iterator[Any]:
    """Factory for extra watched pages (a second tab)."""
    pages: list[Watched] = []

    def make() -> Watched:
        w = Watched(browser_context.new_page(), browser_navi.url)
        pages.append(w)
        return w

    yield make
    for w in pages:
        if not w.page.is_closed():
            w.page.close()
        assert not w.unexpected_errors(), f"console errors: {w.unexpected_errors()}"


def create_session(navi: LiveNavi, title: str = "", profile_id: str | None = None) -> str:
    body: dict[str, Any] = {"title": title}
    if profile_id:
        body["profile_id"] = profile_id
    status, data = navi.request("POST", "/sessions", body)
    assert status == 201, data
    return str(data["session_id"])


def django_shell(navi: LiveNavi, code: str) -> str:
    return navi.manage("shell", "-c", code)


def seed_messages(navi: LiveNavi, session_id: str, messages: list[dict[str, Any]]) -> None:
    """Append display messages straight through the service (history for rendering tests)."""
    import json

    code = (
        "import json\n"
        "from sessions_app.services import message_append\n"
        f"for m in json.loads({json.dumps(json.dumps(messages))}):\n"
        f"    message_append(session_id={session_id!r}, **m)\n"
    )
    django_shell(navi, code)


def chromium_path() -> Path:
    return Path(CHROMIUM)
