"""The memory page in real Chromium: facts by category with the message that stated them (a link that opens
the conversation at that message, even one that is not in the latest page), the summary, edit (a bad value
refused with the reason and nothing lost, then a good one saved) and forget."""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, create_session, django_shell, seed_messages
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser


def _seed(navi: LiveNavi) -> tuple[str, dict[str, int]]:
    sid = create_session(navi, "Family and gear")
    early = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"},
             {"role": "user", "content": "My daughter Mia starts school in September."},
             {"role": "assistant", "content": "How exciting."}]
    filler = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"chatter {i}"} for i in range(220)]
    seed_messages(navi, sid, [*early, *filler, {"role": "user", "content": "I run Arch Linux on my laptop."}])
    code = (
        "import json\n"
        "from django.contrib.auth import get_user_model\n"
        "from memory_app.models import MemoryFact, MemorySummary\n"
        "from sessions_app.models import Message\n"
        f"user = get_user_model().objects.get(username={navi.username!r})\n"
        "MemoryFact.objects.filter(user=user).delete()\n"
        f"rows = Message.objects.filter(session_id={sid!r}, role='user')\n"
        "mia = rows.get(content__startswith='My daughter')\n"
        "arch = rows.get(content__startswith='I run Arch')\n"
        f"f1 = MemoryFact.objects.create(user=user, category='people', key='daughter_name', value='Mia', source_session_id={sid!r}, source_message=mia)\n"
        f"f2 = MemoryFact.objects.create(user=user, category='environment', key='laptop_os', value='Arch Linux', source_session_id={sid!r}, source_message=arch)\n"
        "f3 = MemoryFact.objects.create(user=user, category='other', key='hobby', value='chess')\n"
        "MemorySummary.objects.update_or_create(user=user, defaults={'text': 'Alice has a daughter, Mia, and runs Arch Linux.'})\n"
        "print(json.dumps({'mia': f1.pk, 'arch': f2.pk, 'hobby': f3.pk, 'mia_seq': mia.seq}))\n"
    )
    return sid, json.loads(django_shell(navi, code).strip().splitlines()[-1])


def test_memory_page_provenance_edit_and_forget(watched: Watched, browser_navi: LiveNavi) -> None:
    watched.allow(r"HTTP 400 .*/memory/facts/\d+|status of 400")  # the refused edit
    sid, ids = _seed(browser_navi)
    page = watched.page
    page.goto(browser_navi.url + "/")
    page.wait_for_selector("body.ready")
    page.click("a[aria-label=Memory]")
    page.wait_for_url(re.compile(r"/memory/$"))
    page.wait_for_selector("body.ready")

    expect(page.locator("#memory-summary")).to_have_text("Alice has a daughter, Mia, and runs Arch Linux.")
    expect(page.locator(".memory-group h3")).to_have_text([re.compile("^environment"), re.compile("^people"),
                                                           re.compile("^other")])
    mia = page.locator(f".memory-fact[data-fact-id='{ids['mia']}']")
    expect(mia.locator(".memory-key")).to_have_text("daughter name")
    expect(mia.locator(".memory-value")).to_have_text("Mia")
    expect(mia.locator(".memory-source")).to_contain_text("Said in “Family and gear”")
    expect(mia.locator(".memory-excerpt")).to_have_text("My daughter Mia starts school in September.")
    expect(page.locator(f".memory-fact[data-fact-id='{ids['hobby']}'] .memory-source")).to_contain_text("is not known")

    # Edit: an empty value is refused with the reason, the text stays, nothing changes on the server.
    arch = page.locator(f".memory-fact[data-fact-id='{ids['arch']}']")
    arch.locator("[data-action=edit]").click()
    box = arch.locator(".memory-edit textarea")
    expect(box).to_have_value("Arch Linux")
    box.fill("   ")
    arch.locator("[data-action=save]").click()
    expect(arch.locator(".memory-error")).to_have_text("Not saved: The value is empty.")
    assert browser_navi.request("GET", f"/memory/facts/{ids['arch']}")[1]["value"] == "Arch Linux"
    box.fill("Fedora 41")
    arch.locator("[data-action=save]").click()
    expect(arch.locator(".memory-value")).to_have_text("Fedora 41")
    expect(arch.locator(".memory-edit")).to_have_count(0)
    assert browser_navi.request("GET", f"/memory/facts/{ids['arch']}")[1]["value"] == "Fedora 41"

    # Forget: confirmed in a dialog, gone from the page and from the server.
    page.locator(f".memory-fact[data-fact-id='{ids['hobby']}'] [data-action=forget]").click()
    dialog = page.locator("dialog.modal")
    expect(dialog).to_contain_text("Navi will no longer know “hobby: chess”.")
    dialog.locator("button[value=ok]").click()
    expect(page.locator(f".memory-fact[data-fact-id='{ids['hobby']}']")).to_have_count(0)
    expect(page.locator(".memory-group h3")).to_have_count(2)
    assert browser_navi.request("GET", f"/memory/facts/{ids['hobby']}")[0] == 404

    # Provenance: the link opens the conversation at the stating message, older than the latest page.
    mia.locator(".memory-source-link").click()
    page.wait_for_url(re.compile(rf"/#{sid}/m{ids['mia_seq']}$"))
    page.wait_for_selector("body.ready")
    target = page.locator(f"#messages .msg.user[data-seq='{ids['mia_seq']}']")
    expect(target).to_have_class(re.compile(r"\bis-target\b"))
    expect(target).to_contain_text("My daughter Mia starts school in September.")
    expect(target).to_be_in_viewport()
