"""Export download and import in real Chromium: the header's download menu saves the open
conversation (HTML, JSON), and importing the JSON opens it as a new conversation."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, create_session, seed_messages
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def test_download_the_conversation_and_import_it_again(watched: Watched, browser_navi: LiveNavi,
                                                        tmp_path: Path) -> None:
    sid = create_session(browser_navi, "Export me")
    seed_messages(browser_navi, sid, [
        {"role": "user", "content": "What is the **capital** of Portugal?"},
        {"role": "assistant", "content": "Lisbon. <img src=x onerror=\"window.__pwned=1\">"},
    ])
    page = watched.open(sid)
    menu = page.locator("#export-menu")
    expect(menu).to_be_visible()

    menu.locator("summary").click()
    with page.expect_download() as info:
        page.get_by_role("menuitem", name="Web page (.html)").click()
    download = info.value
    assert download.suggested_filename == f"navi-export-me-{sid[:8]}.html"
    html_path = tmp_path / download.suggested_filename
    download.save_as(html_path)
    html = html_path.read_text(encoding="utf-8")
    assert "<strong>capital</strong>" in html and "&lt;img src=x" in html

    # The saved page opens on its own (file://, nothing external) and shows the conversation.
    viewer = page.context.new_page()
    viewer.goto(html_path.as_uri())
    expect(viewer.locator("h1")).to_have_text("Export me")
    expect(viewer.locator("section.msg.assistant")).to_contain_text("Lisbon.")
    assert viewer.evaluate("() => window.__pwned") is None
    viewer.close()

    menu.locator("summary").click()
    with page.expect_download() as info:
        page.get_by_role("menuitem", name=re.compile("Navi JSON")).click()
    json_path = tmp_path / info.value.suggested_filename
    info.value.save_as(json_path)
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    assert [m["content"] for m in doc["messages"]][0] == "What is the **capital** of Portugal?"

    # Import it: a new conversation opens with the same messages.
    page.set_input_files("#import-input", str(json_path))
    expect(page.locator(".toast")).to_contain_text("Imported “Export me” (2 messages).")
    page.wait_for_function(f"() => window.__navi.store.currentId && window.__navi.store.currentId !== '{sid}'")
    expect(page.locator("#messages .msg.user")).to_contain_text("What is the **capital** of Portugal?")  # user text: plain
    expect(page.locator("#chat-title")).to_have_text("Export me")
    assert page.evaluate("() => window.__pwned") is None


def test_a_file_over_the_import_limit_is_refused_before_it_is_uploaded(watched: Watched, browser_navi: LiveNavi,
                                                                         tmp_path: Path) -> None:
    sid = create_session(browser_navi, "Stays open")
    page = watched.open(sid)
    big = tmp_path / "huge.json"
    big.write_bytes(b'{"format": "navi.session", "pad": "' + b"x" * (21 * 1024 * 1024) + b'"}')
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and "/sessions/import" in r.url else None)
    page.set_input_files("#import-input", str(big))
    expect(page.locator(".toast")).to_contain_text("“huge.json” is too large to import (21.0 MB; at most 20 MB)")
    assert posts == []
    assert page.evaluate("() => window.__navi.store.currentId") == sid
