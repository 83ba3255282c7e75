"""Web Push against a local push service that checks VAPID and decrypts the payload: delivery,
subscriptions and their bad input, dead subscriptions removed, passing failures retried."""
from __future__ import annotations

import stat
from typing import Any

import pytest

from notify_app import kinds, vapid
from notify_app.delivery import delivery_attempt
from notify_app.dispatch import notify
from notify_app.models import Delivery, PushSubscription

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _own_data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path / "data"


def _subscribe(api: Any, push_service: Any, name: str) -> dict[str, Any]:
    sub = push_service.subscription(name)
    resp = api.post("/notifications/push/subscriptions", {**sub, "user_agent": "Chromium test"})
    assert resp.status_code == 201, resp.content
    return sub


def _push_delivery(user: Any, **fields: Any) -> Delivery:
    notification = notify(user_id=user.pk, kind=kinds.RECALL_FINISHED, title="Recall finished · Build watch",
                          body="The build is green.", **fields)
    assert notification is not None
    return notification.deliveries.get(channel=kinds.WEBPUSH)


def test_the_vapid_key_is_made_once_into_the_data_directory(api, settings):
    first = api.get("/notifications/push/key").json()["public_key"]
    path = settings.DATA_DIR / "vapid_private.pem"
    assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert api.get("/notifications/settings").json()["push"] == {"public_key": first, "subscriptions": 0}
    vapid._cached = None  # a restarted process reads the same key
    assert vapid.public_key() == first
    assert len(pytest.importorskip("tests.notify.pushserver").b64url_decode(first)) == 65


def test_a_notification_is_pushed_encrypted_and_signed(api, user, push_service):
    from sessions_app.services import session_create

    push_service.vapid_public_key = vapid.public_key()
    _subscribe(api, push_service, "laptop")
    session = session_create(owner=user, title="Build watch")
    delivery = _push_delivery(user, session_id=str(session.id))
    assert delivery_attempt(delivery.pk, attempt=0).status == "sent"
    [push] = push_service.received
    assert push.payload == {"title": "Recall finished · Build watch", "body": "The build is green.",
                            "url": f"/#{session.id}", "tag": f"navi-{delivery.notification_id}",
                            "kind": "recall_finished", "session_id": str(session.id)}
    assert push.headers["ttl"] == "86400"
    assert PushSubscription.objects.get().last_success_at is not None


def test_every_browser_gets_it_and_a_dead_subscription_is_removed(api, user, push_service):
    _subscribe(api, push_service, "laptop")
    _subscribe(api, push_service, "phone")
    push_service.replies["phone"] = [410]
    assert delivery_attempt(_push_delivery(user).pk, attempt=0).status == "sent"
    assert [r.browser for r in push_service.received] == ["laptop"]
    assert list(PushSubscription.objects.values_list("endpoint", flat=True)) == [f"{push_service.url}/push/laptop"]


def test_when_the_only_subscription_is_gone_the_delivery_is_skipped(api, user, push_service):
    _subscribe(api, push_service, "laptop")
    push_service.replies["laptop"] = [404]
    delivery = _push_delivery(user)
    assert delivery_attempt(delivery.pk, attempt=0).status == "skipped"
    assert not PushSubscription.objects.exists()
    assert api.get("/notifications/settings").json()["push"]["subscriptions"] == 0


def test_a_failing_push_service_is_retried(api, user, push_service, settings):
    settings.NOTIFY_RETRY_BASE_SECONDS = 5
    _subscribe(api, push_service, "laptop")
    push_service.replies["laptop"] = [503]
    delivery = _push_delivery(user)
    first = delivery_attempt(delivery.pk, attempt=0)
    assert (first.status, first.retry_in) == ("retry", 5)
    assert "503" in first.error
    assert delivery_attempt(delivery.pk, attempt=1).status == "sent"
    assert len(push_service.received) == 1


def test_no_push_delivery_without_a_subscription(user):
    notification = notify(user_id=user.pk, kind=kinds.RECALL_FINISHED, title="t")
    assert not notification.deliveries.filter(channel=kinds.WEBPUSH).exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"endpoint": "ftp://push.example/x"}, "The push endpoint must be an https:// URL"),
    ({"endpoint": "http://push.example/x"}, "The push endpoint must be an https:// URL"),
    ({"endpoint": "https://127.0.0.1/push/x"}, "'127.0.0.1' is a loopback address: Navi only sends to public"),
    ({"endpoint": "https://10.0.0.8/push/x"}, "'10.0.0.8' is a private network address"),
    ({"keys": {"p256dh": "not base64!", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh is not URL-safe base64"),
    ({"keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh is not a P-256 public key"),
    ({"keys": {"auth": "AAAA"}}, "keys.auth must be the subscription's 16-byte auth secret"),
    ({"keys": {}}, "Invalid request: keys.p256dh"),
])
def test_bad_subscriptions_are_refused(api, push_service, settings, change, message):
    settings.WEBPUSH_ALLOW_PRIVATE_ENDPOINTS = False
    sub = push_service.subscription("laptop")
    sub["endpoint"] = "https://127.0.0.1/push/laptop"
    body = {**sub, **change}
    if "keys" in change and change["keys"]:
        body["keys"] = {**sub["keys"], **change["keys"]}
    if "endpoint" not in change:
        settings.WEBPUSH_ALLOW_PRIVATE_ENDPOINTS = True
        body["endpoint"] = f"{push_service.url}/push/laptop"
    resp = api.post("/notifications/push/subscriptions", body)
    assert resp.status_code in (400, 422)
    assert message in resp.json()["detail"]
    assert not PushSubscription.objects.exists()


def test_unsubscribe(api, other_api, push_service):
    sub = _subscribe(api, push_service, "laptop")
    assert other_api.delete("/notifications/push/subscriptions", {"endpoint": sub["endpoint"]}).status_code == 404
    assert api.delete("/notifications/push/subscriptions", {"endpoint": sub["endpoint"]}).json() == {"ok": True}
    resp = api.delete("/notifications/push/subscriptions", {"endpoint": sub["endpoint"]})
    assert resp.status_code == 404
    assert resp.json()["detail"] == "This browser has no push subscription on your account."


def test_the_service_worker_is_served_for_the_whole_site(client):
    resp = client.get("/sw.js")
    assert resp.status_code == 200
    assert resp["Service-Worker-Allowed"] == "/"
    assert resp["Content-Type"].startswith("text/javascript")
    assert b'addEventListener("push"' in resp.content
