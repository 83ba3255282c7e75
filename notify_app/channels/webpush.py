"""Web Push (RFC 8030) with VAPID (RFC 8292) and encrypted payloads (RFC 8291, aes128gcm) through
pywebpush, to every browser the user subscribed.

A subscription the push service says is gone (404, 410) is deleted. A delivery is retried only
when no browser got it (so that one flaky push service does not make the others show it twice);
it is skipped when the user has no live subscription left. Endpoints must be public https URLs
(the push services of the browser vendors); WEBPUSH_ALLOW_PRIVATE_ENDPOINTS opens loopback and
LAN addresses and plain http for development and tests.
"""
from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import requests
import structlog
from django.conf import settings
from django.utils import timezone
from pywebpush import WebPushException, webpush

from navi_site.errors import BadRequest
from notify_app import vapid
from notify_app.channels import ChannelStatus, DeliveryFailed, DeliveryGone, DeliveryRetry
from notify_app.kinds import WEBPUSH
from notify_app.models import Notification, PushSubscription

log = structlog.get_logger(__name__)

TTL_SECONDS = 24 * 3600  # the push service keeps a notification this long for an offline browser
MAX_BODY_CHARS = 1500  # the encrypted record holds ~4 KB of JSON
SEND_TIMEOUT = 10.0


def payload(notification: Notification) -> dict[str, Any]:
    """What the service worker receives (static/sw.js shows it)."""
    return {
        "title": notification.title,
        "body": notification.body[:MAX_BODY_CHARS],
        "url": notification.url,
        "tag": f"navi-{notification.pk}",
        "kind": notification.kind,
        "session_id": str(notification.session_id) if notification.session_id else None,
    }


def check_endpoint(endpoint: str) -> None:
    """Raise BadRequest unless ``endpoint`` is a push service Navi may post to."""
    from tools_app.safety.network import non_public_reason

    parts = urlsplit(endpoint)
    allow_private = bool(getattr(settings, "WEBPUSH_ALLOW_PRIVATE_ENDPOINTS", False))
    if parts.scheme != "https" and not (allow_private and parts.scheme == "http"):
        raise BadRequest("The push endpoint must be an https:// URL (the browser's push service).")
    if not parts.hostname:
        raise BadRequest("The push endpoint has no host name.")
    if allow_private:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError:
        raise BadRequest(f"The push endpoint's host {parts.hostname!r} cannot be resolved.") from None
    for info in infos:
        reason = non_public_reason(ipaddress.ip_address(info[4][0]))
        if reason:
            raise BadRequest(f"The push endpoint's host {parts.hostname!r} is {reason}: Navi only sends to "
                             "public push services.")


class WebPushChannel:
    name = WEBPUSH

    def status(self, user: Any) -> ChannelStatus:
        count = PushSubscription.objects.filter(user=user).count()
        if not count:
            return ChannelStatus(False, "Turn it on in each browser that should show notifications (below).")
        return ChannelStatus(True, f"To {count} browser{'s' if count != 1 else ''}")

    def send(self, notification: Notification, user: Any) -> None:
        subscriptions = list(PushSubscription.objects.filter(user=user))
        if not subscriptions:
            raise DeliveryGone("no browser is subscribed any more")
        data = json.dumps(payload(notification), ensure_ascii=False)
        delivered, passing, permanent = 0, [], []
        for sub in subscriptions:
            try:
                self._post(sub, data)
            except DeliveryGone as exc:
                log.info("webpush_subscription_gone", subscription_id=sub.pk, user_id=user.pk, reason=exc.message)
                sub.delete()
            except DeliveryRetry as exc:
                passing.append(exc.message)
            except DeliveryFailed as exc:
                permanent.append(exc.message)
            else:
                delivered += 1
                PushSubscription.objects.filter(pk=sub.pk).update(last_success_at=timezone.now())
        if delivered:
            if passing or permanent:
                log.warning("webpush_partly_delivered", delivered=delivered, errors=passing + permanent)
            return
        if passing:
            raise DeliveryRetry("; ".join(passing))
        if permanent:
            raise DeliveryFailed("; ".join(permanent))
        raise DeliveryGone("every subscription was gone (the browsers unsubscribed)")

    @staticmethod
    def _post(sub: PushSubscription, data: str) -> None:
        try:
            check_endpoint(sub.endpoint)
        except BadRequest as exc:
            raise DeliveryFailed(exc.message) from None
        try:
            webpush(sub.info(), data=data, vapid_private_key=vapid.vapid(),
                    vapid_claims={"sub": _contact()}, ttl=TTL_SECONDS, timeout=SEND_TIMEOUT)
        except WebPushException as exc:
            status = exc.response.status_code if exc.response is not None else None
            where = urlsplit(sub.endpoint).hostname
            if status in (404, 410):
                raise DeliveryGone(f"{where} answered {status}") from None
            if status is None:  # refused before sending: the subscription's keys are unusable
                raise DeliveryFailed(f"the subscription for {where} is unusable: {exc.message}") from None
            if status == 429 or status >= 500:
                raise DeliveryRetry(f"{where}: {exc.message}") from None
            raise DeliveryFailed(f"{where} refused the push: {exc.message}") from None
        except requests.RequestException as exc:
            raise DeliveryRetry(f"{urlsplit(sub.endpoint).hostname}: {type(exc).__name__}: {exc}") from None


def _contact() -> str:
    contact = getattr(settings, "WEBPUSH_CONTACT", "") or f"mailto:{settings.DEFAULT_FROM_EMAIL}"
    return contact if contact.startswith(("mailto:", "https://")) else f"mailto:{contact}"
