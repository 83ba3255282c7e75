"""REST for the settings page: /notifications/settings, the recent notifications, a test send.
Web Push subscriptions live under /notifications/push (``notify_app.push_api``)."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field

from notify_app import kinds, selectors, services, vapid

PREFIX = "/notifications"
router = Router(tags=["notifications"])

_settings_hooks: list[Any] = []


def add_settings_section(fn: Any) -> None:
    """``fn(user) -> (name, dict)`` adds a section to GET /notifications/settings (telegram_app)."""
    if fn not in _settings_hooks:
        _settings_hooks.append(fn)


class SettingsIn(Schema):
    choices: dict[str, dict[str, bool]] = Field(default_factory=dict,
                                                description="{kind: {channel: on}}; only the pairs given change")
    email: str | None = Field(default=None, max_length=254, description="Where e-mail notifications go; \"\" clears it")


def settings_out(user: Any) -> dict[str, Any]:
    statuses = selectors.channel_statuses(user)
    out: dict[str, Any] = {
        "kinds": [{"name": k.name, "label": k.label, "help": k.help} for k in kinds.KINDS.values() if k.choosable],
        "channels": [{"name": name, "label": kinds.CHANNEL_LABELS[name], "available": statuses[name].available,
                      "detail": statuses[name].detail} for name in kinds.CHANNELS],
        "choices": selectors.choices_for(user),
        "email": user.email,
        "push": {"public_key": vapid.public_key(),
                 "subscriptions": selectors.push_subscription_count(user)},
    }
    for hook in _settings_hooks:
        name, section = hook(user)
        out[name] = section
    return out


@router.get("/settings", summary="Notification choices per kind and channel, and what each channel reaches")
def get_settings(request: HttpRequest) -> dict[str, Any]:
    return settings_out(request.user)


@router.put("/settings", summary="Change notification choices and the e-mail address")
def put_settings(request: HttpRequest, payload: SettingsIn) -> dict[str, Any]:
    if payload.email is not None:
        services.email_set(user=request.user, email=payload.email)
    services.preferences_set(user=request.user, choices=payload.choices)
    return settings_out(request.user)


@router.post("/test", response={202: dict}, summary="Send a test notification to every channel that reaches you")
def send_test(request: HttpRequest) -> Status:
    notification = services.notification_test(user=request.user)
    channels = [d.channel for d in notification.deliveries.all()] if notification else []
    return Status(202, {"id": notification.pk if notification else None, "channels": channels})


@router.get("", summary="Your recent notifications and how each delivery went")
def list_notifications(request: HttpRequest, limit: int = Query(20, ge=1, le=100)) -> dict[str, Any]:
    items = selectors.recent_notifications(request.user, limit=limit)
    return {"items": [{
        "id": n.pk, "kind": n.kind, "title": n.title, "body": n.body, "url": n.url,
        "session_id": str(n.session_id) if n.session_id else None, "created_at": n.created_at.isoformat(),
        "deliveries": [{"channel": d.channel, "status": d.status, "attempts": d.attempts, "error": d.last_error}
                       for d in n.deliveries.all()],
    } for n in items]}


class PushKeysIn(Schema):
    p256dh: str = Field(max_length=200)
    auth: str = Field(max_length=100)


class PushSubscriptionIn(Schema):
    endpoint: str = Field(max_length=1000, description="PushSubscription.endpoint")
    keys: PushKeysIn
    user_agent: str = Field(default="", max_length=1000)


class PushEndpointIn(Schema):
    endpoint: str = Field(max_length=1000)


@router.get("/push/key", summary="The VAPID public key browsers subscribe with")
def push_key(request: HttpRequest) -> dict[str, Any]:
    return {"public_key": vapid.public_key()}


@router.post("/push/subscriptions", response={201: dict}, summary="Save this browser's push subscription")
def push_subscribe(request: HttpRequest, payload: PushSubscriptionIn) -> Status:
    sub = services.push_subscribe(user=request.user, endpoint=payload.endpoint, p256dh=payload.keys.p256dh,
                                  auth=payload.keys.auth, user_agent=payload.user_agent)
    return Status(201, {"id": sub.pk, "endpoint": sub.endpoint})


@router.delete("/push/subscriptions", summary="Forget this browser's push subscription")
def push_unsubscribe(request: HttpRequest, payload: PushEndpointIn) -> dict[str, Any]:
    services.push_unsubscribe(user=request.user, endpoint=payload.endpoint)
    return {"ok": True}
