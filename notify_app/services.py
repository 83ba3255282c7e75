"""Writes of the settings page: choices per kind and channel, the e-mail address, a test notification."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from navi_site.errors import BadRequest, NotFound
from notify_app import kinds
from notify_app.dispatch import notify
from notify_app.models import Notification, Preference, PushSubscription


def preferences_set(*, user: Any, choices: dict[str, dict[str, bool]]) -> None:
    """Save the user's choices ({kind: {channel: on}}); only the pairs given change.
    Raises BadRequest naming an unknown kind or channel (nothing is saved then)."""
    choosable = [k for k, spec in kinds.KINDS.items() if spec.choosable]
    for kind, per_channel in choices.items():
        if kind not in choosable:
            raise BadRequest(f"Unknown notification kind {kind[:60]!r}: use one of {', '.join(choosable)}.")
        for channel in per_channel:
            if channel not in kinds.CHANNELS:
                raise BadRequest(f"Unknown channel {channel[:60]!r} for {kind}: use one of "
                                 f"{', '.join(kinds.CHANNELS)}.")
    with transaction.atomic():
        for kind, per_channel in choices.items():
            for channel, enabled in per_channel.items():
                Preference.objects.update_or_create(user=user, kind=kind, channel=channel,
                                                    defaults={"enabled": bool(enabled)})


def email_set(*, user: Any, email: str) -> None:
    """Set (or clear, with "") the address e-mail notifications go to. Raises BadRequest if invalid."""
    email = email.strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise BadRequest(f"{email[:80]!r} is not an e-mail address (name@example.org).") from None
    user.email = email
    user.save(update_fields=["email"])


def notification_test(*, user: Any) -> Notification | None:
    """Send a test notification to every channel that can reach the user."""
    return notify(user_id=user.pk, kind=kinds.TEST, title="Test notification from Navi",
                  body="If you read this, Navi can reach you here.")


def _b64url(value: str, what: str) -> bytes:
    import base64
    import binascii

    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise BadRequest(f"keys.{what} is not URL-safe base64: send PushSubscription.toJSON() as it is.") from None


def push_subscribe(*, user: Any, endpoint: str, p256dh: str, auth: str, user_agent: str = "") -> PushSubscription:
    """Save this browser's push subscription (``PushSubscription.toJSON()``) for ``user``. An endpoint
    another account subscribed before moves to this one (the browser is now signed in as it).
    Raises BadRequest for an endpoint Navi may not post to or keys that are not a P-256 key and an
    auth secret."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from notify_app.channels.webpush import check_endpoint

    check_endpoint(endpoint)
    key = _b64url(p256dh, "p256dh")
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), key)
    except ValueError:
        raise BadRequest("keys.p256dh is not a P-256 public key (65 bytes, uncompressed).") from None
    if len(_b64url(auth, "auth")) != 16:
        raise BadRequest("keys.auth must be the subscription's 16-byte auth secret.")
    sub, _ = PushSubscription.objects.update_or_create(
        endpoint=endpoint, defaults={"user": user, "p256dh": p256dh, "auth": auth, "user_agent": user_agent[:300]})
    return sub


def push_unsubscribe(*, user: Any, endpoint: str) -> None:
    """Forget this browser's subscription. Raises NotFound if the user has no such subscription."""
    deleted, _ = PushSubscription.objects.filter(user=user, endpoint=endpoint).delete()
    if not deleted:
        raise NotFound("This browser has no push subscription on your account.")
