"""Notification settings in real Chromium: the page, saving choices and the e-mail address, and
refusals shown to the user."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Watched
from tests.notify.pushserver import PushService

pytestmark = pytest.mark.browser


def open_settings(watched: Watched) -> None:
    page = watched.open()
    page.click("#notify-settings")
    expect(page.locator(".settings-modal")).to_be_visible()


def test_settings_page_saves_choices_and_the_email_address(watched: Watched, browser_navi) -> None:
    page = watched.page
    open_settings(watched)
    box = page.get_by_label("A long turn finished: E-mail")
    expect(box).not_to_be_checked()  # the default
    expect(page.get_by_label("A recall failed: Browser push")).to_be_checked()
    expect(page.locator(".channel-notes [data-channel=email]")).to_contain_text(
        "The server has no SMTP settings: the administrator sets EMAIL_HOST.")
    box.check()
    page.wait_for_function("() => !document.querySelector('[data-kind=long_turn][data-channel=email]').disabled")

    watched.allow(r"HTTP 400 .*/notifications/settings")
    watched.allow(r"status of 400 \(Bad Request\)")  # the browser's log line for the refusal
    page.fill("#notify-email", "not an address")
    page.click(".inline-form button[type=submit]")
    expect(page.locator(".settings-message.error")).to_contain_text("'not an address' is not an e-mail address")
    page.fill("#notify-email", "tester@example.org")
    page.click(".inline-form button[type=submit]")
    expect(page.locator(".settings-message")).to_have_text("E-mail address saved.")

    page.click(".settings-head button")  # close, then open again: what was saved is shown
    open_settings(watched)
    expect(page.get_by_label("A long turn finished: E-mail")).to_be_checked()
    expect(page.locator("#notify-email")).to_have_value("tester@example.org")
    status, out = browser_navi.request("GET", "/notifications/settings")
    assert status == 200 and out["choices"]["long_turn"]["email"] is True and out["email"] == "tester@example.org"


def _registration_id(cdp: Any, page: Any, scope: str, timeout: float = 10.0) -> str:
    found: dict[str, str] = {}

    def seen(event: dict[str, Any]) -> None:
        for reg in event.get("registrations", []):
            if reg.get("scopeURL") == scope and not reg.get("isDeleted"):
                found["id"] = reg["registrationId"]

    cdp.on("ServiceWorker.workerRegistrationUpdated", seen)
    cdp.send("ServiceWorker.enable")
    deadline = time.monotonic() + timeout
    while "id" not in found and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # Playwright hands CDP events to callbacks while it works
    assert "id" in found, f"no service worker registration for {scope}"
    return found["id"]


def test_the_service_worker_shows_a_pushed_notification(watched: Watched, browser_navi, browser_context) -> None:
    """The server pushes a test notification to a (local) push service, which decrypts it; the
    payload is then delivered to the service worker directly (Chromium offline cannot reach a
    vendor's push service), and the worker shows it."""
    base = browser_navi.url
    browser_context.grant_permissions(["notifications"], origin=base)
    page = watched.open()
    page.evaluate("async () => { await navigator.serviceWorker.register('/sw.js', {scope: '/'}); "
                  "await navigator.serviceWorker.ready; }")
    service = PushService()
    try:
        status, key = browser_navi.request("GET", "/notifications/push/key")
        assert status == 200
        service.vapid_public_key = key["public_key"]
        status, out = browser_navi.request("POST", "/notifications/push/subscriptions", service.subscription("chromium"))
        assert status == 201, out
        status, out = browser_navi.request("POST", "/notifications/test")
        assert status == 202 and "webpush" in out["channels"], out
        [push] = service.wait(1)
        assert push.payload["title"] == "Test notification from Navi"
    finally:
        browser_navi.request("DELETE", "/notifications/push/subscriptions", {"endpoint": f"{service.url}/push/chromium"})
        service.close()

    page.wait_for_function("async () => (await navigator.serviceWorker.ready).active.state === 'activated'")
    cdp = browser_context.new_cdp_session(page)
    registration = _registration_id(cdp, page, base + "/")
    shown: list[dict[str, Any]] = []
    for _ in range(3):  # a push to a worker that is still starting can be dropped under load: send it again
        cdp.send("ServiceWorker.deliverPushMessage",
                 {"origin": base, "registrationId": registration, "data": json.dumps(push.payload)})
        deadline = time.monotonic() + 5
        while not shown and time.monotonic() < deadline:
            shown = page.evaluate("async () => (await (await navigator.serviceWorker.ready).getNotifications())"
                                  ".map(n => ({title: n.title, body: n.body, tag: n.tag, url: n.data.url}))")
            page.wait_for_timeout(100)
        if shown:
            break
    assert shown == [{"title": "Test notification from Navi", "body": "If you read this, Navi can reach you here.",
                      "tag": push.payload["tag"], "url": "/"}]
