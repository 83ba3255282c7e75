"""Screenshots of the main states of the chat client.

They are for people (README, reviews): the test checks the states render, the pictures show how.
A normal run writes them to a temporary folder, so the suite never rewrites tracked files;
``NAVI_UPDATE_SCREENSHOTS=1`` writes them to docs/screenshots/*.png (the README's pictures) instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import SideReplies, Watched, create_session, django_shell, seed_messages
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
NAMES = ("empty", "plan-card", "streaming-tools", "recall-banner", "dark", "mobile-375", "mobile-375-drawer")

ANSWER = """Your root disk is **71% full** (29 GB free). The biggest folders:

| Folder | Size |
|---|---|
| `/var/lib/docker` | 12 GB |
| `/var/log` | 3.1 GB |
| `/home/me/Downloads` | 2.4 GB |

To reclaim space from unused Docker images:

```bash
docker image prune --all --filter "until=720h"
sudo journalctl --vacuum-time=14d
```

Want me to schedule a weekly check?"""


def screenshots_dir(tmp: Path) -> Path:
    """docs/screenshots when asked to update them (NAVI_UPDATE_SCREENSHOTS=1), else ``tmp``."""
    return DOCS if os.environ.get("NAVI_UPDATE_SCREENSHOTS") == "1" else tmp


@dataclass(frozen=True, slots=True)
class Shots:
    out: Path

    def __call__(self, page: Page, name: str) -> None:
        assert name in NAMES, name
        page.wait_for_timeout(250)  # let transitions settle
        page.screenshot(path=str(self.out / f"{name}.png"))


@pytest.fixture
def shot(tmp_path: Path) -> Shots:
    out = screenshots_dir(tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return Shots(out)


def rich_history(navi: LiveNavi) -> str:
    sid = create_session(navi, "Disk cleanup on the home server", "server_admin")
    seed_messages(navi, sid, [
        {"role": "user", "content": "My server is running out of disk space. What can I clean up?"},
        {"role": "assistant", "content": "1. Check disk usage with df\n2. Find the largest folders\n3. Suggest safe cleanups",
         "is_plan": True},
        {"role": "assistant", "content": "", "thinking": "Start with df, then du on /var and /home.",
         "tool_calls": [{"id": "a", "name": "terminal", "arguments": {"command": "df -h /"}},
                        {"id": "b", "name": "terminal", "arguments": {"command": "du -sh /var/* /home/*"}}]},
        {"role": "tool", "tool_call_id": "a", "name": "terminal",
         "content": "Filesystem  Size  Used Avail Use% Mounted on\n/dev/sda1   100G   71G   29G  71% /"},
        {"role": "tool", "tool_call_id": "b", "name": "terminal",
         "content": "12G\t/var/lib/docker\n3.1G\t/var/log\n2.4G\t/home/me/Downloads"},
        {"role": "assistant", "content": ANSWER},
    ])
    return sid


def test_a_normal_run_leaves_the_documented_screenshots_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAVI_UPDATE_SCREENSHOTS", raising=False)
    assert screenshots_dir(tmp_path) == tmp_path
    monkeypatch.setenv("NAVI_UPDATE_SCREENSHOTS", "1")
    assert screenshots_dir(tmp_path) == DOCS
    assert sorted(p.stem for p in DOCS.glob("*.png")) == sorted(NAMES)  # what the README shows exists


def test_screenshots(watched: Watched, browser_navi: LiveNavi, fake: FakeLLMServer, side_replies: SideReplies,
                     shot: Shots) -> None:
    page = watched.open()
    expect(page.locator("#empty-state")).to_be_visible()
    shot(page, "empty")

    sid = rich_history(browser_navi)
    page = watched.open(sid)
    expect(page.locator(".plan-card")).to_have_count(1)
    page.locator(".plan-card summary").click()
    shot(page, "plan-card")

    # A live turn with a plan, tools and streaming text, caught mid-stream.
    side_replies.plans.append("1. Check how much the logs grow per day\n2. Pick a retention time\n3. Apply it")
    fake.script(tool_calls=[{"name": "todo", "arguments": {
        "action": "set", "steps": ["Check log growth", "Pick a retention", "Apply it"]}}])
    fake.script(tool_calls=[{"name": "todo", "arguments": {"action": "update", "step": 1, "status": "done",
                                                            "validation": "journalctl --disk-usage: 3.1G"}}])
    fake.script(thinking="The logs grow about 100 MB a day; two weeks keeps enough history. ",
                text="Keeping **14 days** of logs is a good balance: " + "it frees about 2 GB and keeps recent history. " * 6,
                delay_between_chunks=0.12)
    page.fill("#composer-input", "Set up a sensible log retention, step by step")
    page.press("#composer-input", "Enter")
    expect(page.locator(".msg.assistant.live .answer")).to_contain_text("frees about", timeout=20000)
    page.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; }")
    shot(page, "streaming-tools")
    page.wait_for_function("() => !window.__navi.store.busy", timeout=30000)

    # The recall banner.
    django_shell(browser_navi, (
        "from sessions_app.models import Session\n"
        "from recall_app.services import recall_schedule\n"
        f"recall_schedule(session=Session.objects.get(pk={sid!r}), call_type='recurring', when='2h', "
        "interval_seconds=604800, internal_comment='Weekly disk check', "
        "additional_context_message='Run df -h / with terminal and report if usage is above 80%.')\n"
    ))
    page = watched.open(sid)
    expect(page.locator("#recall-banner")).to_be_visible()
    page.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = 0; }")
    shot(page, "recall-banner")

    page.emulate_media(color_scheme="dark")
    page.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; }")
    shot(page, "dark")

    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 375, "height": 760})
    page.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; }")
    expect(page.locator("#menu-button")).to_be_visible()
    shot(page, "mobile-375")
    page.click("#menu-button")
    expect(page.locator("#sidebar")).to_be_in_viewport()
    shot(page, "mobile-375-drawer")
    page.click("#scrim", position={"x": 360, "y": 300})
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
    assert sorted(p.stem for p in shot.out.glob("*.png")) == sorted(NAMES)
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in shot.out.glob("*.png"))
