"""What Navi notifies about, over which channels, and what is on before a user chooses.

A *kind* is an event a person may want to hear about when no tab shows it; a *channel* is a way to
reach them. Each user chooses per kind and channel (``Preference`` rows); a missing row means the
default below. A channel delivers only where it can (a push subscription, an e-mail address and
SMTP settings, a linked Telegram chat): the choice says "if you can reach me there".
"""
from __future__ import annotations

from dataclasses import dataclass

WEBPUSH = "webpush"
EMAIL = "email"
TELEGRAM = "telegram"
CHANNELS: tuple[str, ...] = (WEBPUSH, EMAIL, TELEGRAM)
CHANNEL_LABELS = {WEBPUSH: "Browser push", EMAIL: "E-mail", TELEGRAM: "Telegram"}

RECALL_FINISHED = "recall_finished"
RECALL_FAILED = "recall_failed"
RECALL_APPROVAL = "recall_approval"
APPROVAL_WAITING = "approval_waiting"
LONG_TURN = "long_turn"
TEST = "test"


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    name: str
    label: str
    help: str
    defaults: frozenset[str]  # the channels that are on until the user chooses
    choosable: bool = True  # shown in the settings page (the test notification goes everywhere)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(name=RECALL_FINISHED, label="A recall finished",
         help="A scheduled recall ran; the notification carries the first lines of its report.",
         defaults=frozenset({WEBPUSH, TELEGRAM})),
    Kind(name=RECALL_FAILED, label="A recall failed",
         help="A scheduled recall ended with an error or was interrupted.",
         defaults=frozenset({WEBPUSH, EMAIL, TELEGRAM})),
    Kind(name=RECALL_APPROVAL, label="A recall waits for approval",
         help="A scheduled recall paused before a tool call that needs your approval.",
         defaults=frozenset({WEBPUSH, EMAIL, TELEGRAM})),
    Kind(name=APPROVAL_WAITING, label="A live turn waits for approval",
         help="A turn asks for approval while its tab is hidden or closed.",
         defaults=frozenset({WEBPUSH, TELEGRAM})),
    Kind(name=LONG_TURN, label="A long turn finished",
         help="A turn that took longer than NOTIFY_LONG_TURN_SECONDS finished while no tab showed it.",
         defaults=frozenset({WEBPUSH, TELEGRAM})),
    Kind(name=TEST, label="Test notification", help="Sent from the settings page to every channel that can reach you.",
         defaults=frozenset(CHANNELS), choosable=False),
)}


def is_default_on(kind: str, channel: str) -> bool:
    return channel in KINDS[kind].defaults
