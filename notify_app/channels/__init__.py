"""The channels a notification can travel: one small object per channel, registered at start-up.

A channel tells whether it can reach a user (``status``: available, and if not, what the user or
the administrator has to do) and sends one notification (``send``, sync, called from a Celery
worker thread). ``send`` raises:

* ``DeliveryRetry``  — a passing failure (SMTP down, a 5xx, a timeout): tried again with backoff;
* ``DeliveryGone``   — the user can no longer be reached there (every push subscription is dead,
  the chat was unlinked): the delivery is skipped;
* ``DeliveryFailed`` — it will never work (a refused address): the delivery fails for good.

Telegram registers its channel from telegram_app (notify_app does not import it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from notify_app.models import Notification


class DeliveryError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DeliveryRetry(DeliveryError):
    """A passing failure: try again later."""


class DeliveryGone(DeliveryError):
    """The channel can no longer reach this user."""


class DeliveryFailed(DeliveryError):
    """A permanent failure."""


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    available: bool
    detail: str  # what it reaches ("2 browsers"), or what is missing and who can fix it


class Channel(Protocol):
    name: str

    def status(self, user: Any) -> ChannelStatus: ...

    def send(self, notification: Notification, user: Any) -> None: ...


_channels: dict[str, Channel] = {}


def register(channel: Channel) -> None:
    _channels[channel.name] = channel


def get(name: str) -> Channel | None:
    return _channels.get(name)


def registered() -> dict[str, Channel]:
    return dict(_channels)
