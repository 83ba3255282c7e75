"""Reads: a user's choices per kind and channel, and what each channel can do for them."""
from __future__ import annotations

from typing import Any

from notify_app import channels
from notify_app.kinds import CHANNELS, KINDS, is_default_on
from notify_app.models import Notification, Preference, PushSubscription


def choices_for(user: Any) -> dict[str, dict[str, bool]]:
    """{kind: {channel: on?}} for every choosable kind: the user's rows over the defaults."""
    saved = {(p.kind, p.channel): p.enabled for p in Preference.objects.filter(user=user)}
    return {
        kind: {ch: saved.get((kind, ch), is_default_on(kind, ch)) for ch in CHANNELS}
        for kind, spec in KINDS.items() if spec.choosable
    }


def wants(user: Any, kind: str, channel: str) -> bool:
    row = Preference.objects.filter(user=user, kind=kind, channel=channel).values_list("enabled", flat=True).first()
    return is_default_on(kind, channel) if row is None else bool(row)


def channel_statuses(user: Any) -> dict[str, channels.ChannelStatus]:
    out: dict[str, channels.ChannelStatus] = {}
    for name in CHANNELS:
        channel = channels.get(name)
        out[name] = channel.status(user) if channel is not None else channels.ChannelStatus(
            False, "This channel is not installed on the server.")
    return out


def recent_notifications(user: Any, *, limit: int) -> list[Notification]:
    return list(Notification.objects.filter(user=user).prefetch_related("deliveries")[:limit])


def push_subscription_count(user: Any) -> int:
    return PushSubscription.objects.filter(user=user).count()
