"""Skills in real Chromium: the proposal card (edit with a mistake, fix, accept; discard), the chip of a
used skill, and the skills page (rendered instructions, versions, one-click rollback)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched, create_session
from tests.browser.test_chat import send, wait_idle
from tests.fakes.fake_llm import FakeLLMServer
from tests.support.live import LiveNavi

pytestmark = pytest.mark.browser

SKILL = ("---\nname: plant-watering\ndescription: Water the balcony plants. Use when the user asks about watering.\n"
         "---\n\n# Watering\n\n1. Check the soil.\n2. Water the dry pots.\n3. Note it in the scratchpad.\n")
STEPS = [{"name": "scratchpad", "arguments": {"action": "write", "section": "findings", "content": "soil dry"}},
         {"name": "scratchpad", "arguments": {"action": "append", "section": "findings", "content": "watered"}},
         {"name": "scratchpad", "arguments": {"action": "read", "section": "findings"}}]


def _task(fake: FakeLLMServer, content: str, answer: str) -> None:
    for step in STEPS:
        fake.script(tool_calls=[step])
    fake.script(tool_calls=[{"name": "skill_write", "arguments": {"content": content, "note": "You water weekly."}}])
    fake.script(text=answer)


def test_the_proposal_card_edit_accept_use_and_roll_back(watched: Watched, browser_navi: LiveNavi,
                                                          fake: FakeLLMServer) -> None:
    watched.allow(r"HTTP 400 .*/skill-proposals/\d+/accept|status of 400")
    sid = create_session(browser_navi, "Plants")
    page = watched.open(sid)
    _task(fake, SKILL, "The plants are watered.")
    send(page, "Water my balcony plants")
    wait_idle(page)
    card = page.locator(".skill-proposal")
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.locator(".skill-proposal-head strong")).to_have_text("Save this as a skill?")
    expect(card.locator(".skill-proposal-sub")).to_have_text("plant-watering — a new skill")
    expect(card.locator(".skill-description")).to_have_text("Water the balcony plants. Use when the user asks about watering.")
    expect(card.locator(".skill-note")).to_have_text("You water weekly.")
    expect(card.locator(".skill-preview ol li")).to_have_count(3)  # the Markdown is rendered, front matter hidden
    expect(card.locator(".skill-preview")).not_to_contain_text("name: plant-watering")

    # Edit: a mistake is refused with the reason and nothing is lost; the fix is saved.
    card.locator("button[data-action=edit]").click()
    editor = card.locator("textarea.skill-editor")
    expect(editor).to_have_value(SKILL)
    editor.fill(SKILL.replace("name: plant-watering", "name: Plant Watering"))
    card.locator("button[data-action=save]").click()
    expect(card.locator(".skill-edit .skill-error")).to_contain_text("The skill was not saved: the name 'Plant Watering' is not valid")
    expect(card).to_have_attribute("data-status", "pending")
    editor.fill(SKILL.replace("3. Note it in the scratchpad.", "3. Note it in the scratchpad.\n4. Check again on Sunday."))
    card.locator("button[data-action=save]").click()
    expect(card).to_have_attribute("data-status", "accepted")
    expect(card.locator(".skill-status")).to_have_text(
        "Saved as skill plant-watering, version 1. Navi will use it for similar requests.")
    # The decision survives a reload (history + REST).
    page.reload()
    page.wait_for_selector("body.ready")
    expect(page.locator(".skill-proposal")).to_have_attribute("data-status", "accepted")

    # The next turn reads the skill: a chip on the turn links to the skills page.
    fake.script(tool_calls=[{"name": "skill_view", "arguments": {"name": "plant-watering"}}])
    fake.script(text="Done, following your watering skill.")
    send(page, "Water them again")
    wait_idle(page)
    chip = page.locator(".msg.assistant").last.locator(".turn-skills .skill-chip")
    expect(chip).to_have_text("plant-watering")
    page.reload()
    page.wait_for_selector("body.ready")
    chip = page.locator(".msg.assistant").last.locator(".turn-skills .skill-chip")
    expect(chip).to_have_text("plant-watering")  # from history too

    # A second proposal (an update) is discarded.
    _task(fake, SKILL.replace("Water the dry pots.", "Water every pot."), "Watered again.")
    send(page, "And once more please")
    wait_idle(page)
    second = page.locator(".skill-proposal[data-status=pending]")
    expect(second.locator(".skill-proposal-sub")).to_have_text("plant-watering — a new version of this skill (now version 1)")
    second.locator("button[data-action=discard]").click()
    expect(page.locator(".skill-proposal").last).to_have_attribute("data-status", "discarded")

    # The skills page: the chip leads there; rendered instructions, versions, one-click rollback.
    page.locator(".skill-chip").first.click()
    page.wait_for_url(re.compile(r"/skills/#plant-watering$"))
    page.wait_for_selector("body.ready")
    detail = page.locator("#skill-detail")
    expect(detail.locator("h2")).to_have_text("plant-watering")
    expect(detail.locator(".skill-rendered ol li")).to_have_count(4)
    expect(detail.locator(".skill-profiles input[data-profile=secretary]")).to_be_checked()
    expect(detail.locator(".skill-version")).to_have_count(1)


def test_the_skills_page_lists_installs_and_rolls_back(watched: Watched, browser_navi: LiveNavi, tmp_path) -> None:
    import io
    import zipfile

    watched.allow(r"HTTP 400 .*/skills|status of 400")
    page = watched.page
    page.goto(browser_navi.url + "/skills/")
    page.wait_for_selector("body.ready")
    names = page.locator(".skills-item-name")
    expect(names.filter(has_text="server-health-check")).to_have_count(1)  # the bundled skills
    page.locator(".skills-item[data-skill=server-health-check]").click()
    detail = page.locator("#skill-detail")
    expect(detail.locator(".skill-rendered h1")).to_have_text("Server health check")
    detail.locator(".skill-files button", has_text="references/thresholds.md").click()
    expect(detail.locator(".skill-file")).to_contain_text("Thresholds for the server health check")

    def archive(description: str) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("shopping-list/SKILL.md", f"---\nname: shopping-list\ndescription: {description}\n---\n\n# Shop\n\nBuy it.\n")
        return buffer.getvalue()

    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip at all")
    page.set_input_files("#skills-file", str(bad))
    page.locator("#skills-install button[type=submit]").click()
    expect(page.locator("#skills-install-error")).to_contain_text("The skill was not installed: the archive 'bad.zip' is not a zip archive")
    for number, description in ((1, "Keep the shopping list."), (2, "Keep the shopping list, sorted by shop.")):
        path = tmp_path / f"shopping-{number}.skill"
        path.write_bytes(archive(description))
        page.set_input_files("#skills-file", str(path))
        if number == 2:
            page.check("#skills-replace")
        page.locator("#skills-install button[type=submit]").click()
        expect(detail.locator(".skill-description")).to_have_text(description)
    expect(detail.locator(".skill-version")).to_have_count(2)
    detail.locator(".skill-version[data-version='1'] button[data-action=rollback]").click()
    expect(detail.locator(".skill-description")).to_have_text("Keep the shopping list.")
    expect(detail.locator(".skill-version")).to_have_count(3)
    expect(detail.locator(".skill-version[data-version='3'] .skill-current")).to_have_text("current")

    # Remove: the versions are kept, listed under "Removed", and one click restores the skill.
    detail.locator("button[data-action=remove]").click()
    page.locator("dialog.modal button[value=ok]").click()
    expect(page.locator(".skills-item[data-skill=shopping-list]")).to_have_count(0)
    removed = page.locator("#skills-removed li[data-skill=shopping-list]")
    expect(removed).to_contain_text("3 versions — Keep the shopping list.")
    removed.locator("button[data-action=restore]").click()
    expect(page.locator(".skills-item[data-skill=shopping-list]")).to_have_count(1)
    expect(detail.locator(".skill-detail-head h2")).to_have_text("shopping-list")
    expect(detail.locator(".skill-description")).to_have_text("Keep the shopping list.")
    expect(detail.locator(".skill-version")).to_have_count(4)
    expect(page.locator("#skills-removed")).to_be_hidden()
