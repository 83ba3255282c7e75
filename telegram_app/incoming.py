"""What an incoming Telegram message brings into a turn, and how far to trust it (issue 20 item 3).

The linked user is the principal: a text they type in their own private chat with the bot is an
instruction, exactly like one typed into the browser — the link is the authentication — so it
does not taint the turn (tainting it would make every Telegram turn ask before every outward
call, and the card would cry wolf). What comes *through* the user from someone else does taint:

* a forwarded message (``forward_origin``): somebody else wrote it, and "forward this to Navi"
  is exactly how an injected instruction reaches an agent;
* a reply quoting a message from another chat (``external_reply``);
* a photo or a file: its content (the text in a screenshot, a document) was made elsewhere, and
  a photo goes into the model's context at once. The caption the user typed is theirs, but the
  turn has still taken the file in.

The labels are what the approval card shows: "this turn read a forwarded Telegram message (from
Mallory)". Pure functions of the python-telegram-bot ``Message``.
"""
from __future__ import annotations

from typing import Any

MAX_NAME = 60


def _origin_name(origin: Any) -> str:
    """Who wrote a forwarded message, as Telegram tells it (a hidden user gives only a name)."""
    for attr in ("sender_user", "sender_chat", "chat"):
        who = getattr(origin, attr, None)
        if who is not None:
            name = getattr(who, "full_name", None) or getattr(who, "title", None) or getattr(who, "username", None)
            if name:
                return str(name)[:MAX_NAME]
    name = getattr(origin, "sender_user_name", None)
    return str(name)[:MAX_NAME] if name else ""


def forwarded_from(message: Any) -> str | None:
    """None for a message the user wrote; else the original author's name ("" when unknown)."""
    origin = getattr(message, "forward_origin", None)
    if origin is None:
        return None
    return _origin_name(origin)


def taint_of(message: Any) -> tuple[str, ...]:
    """The untrusted content a message brings into its turn (empty: the user's own words)."""
    labels: list[str] = []
    author = forwarded_from(message)
    if author is not None:
        labels.append(f"a forwarded Telegram message (from {author})" if author else "a forwarded Telegram message")
    if getattr(message, "external_reply", None) is not None:
        labels.append("a Telegram message quoted from another chat")
    if getattr(message, "photo", None):
        labels.append("a photo sent in Telegram")
    document = getattr(message, "document", None)
    if document is not None:
        name = str(getattr(document, "file_name", "") or "").strip()[:MAX_NAME]
        labels.append(f"a file sent in Telegram ({name})" if name else "a file sent in Telegram")
    return tuple(labels)


def turn_text(message: Any, text: str) -> str:
    """The turn's text: a forwarded message says so, so the model reads it as someone else's words."""
    author = forwarded_from(message)
    if author is None:
        return text
    who = f" from {author}" if author else ""
    return f"[Forwarded message{who}; written by someone else, not by me]\n{text}"
