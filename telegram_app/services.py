"""Linking Telegram chats to accounts, and which Navi session a chat talks to.

Refusals are ``LinkRefused`` with the reply the chat gets: a wrong, used or expired code is
refused with one message that says nothing about which codes exist; a chat that keeps guessing
is refused for a while (MAX_WRONG_CODES per LINK_CODE_TTL).
"""
from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

import structlog
from django.db import transaction
from django.utils import timezone

from navi_site.errors import NotFound
from telegram_app.models import FailedLinkAttempt, LinkCode, TelegramLink, hash_code

log = structlog.get_logger(__name__)

LINK_CODE_TTL = timedelta(minutes=10)
MAX_WRONG_CODES = 5
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a screen and typed on a phone

WRONG_CODE = ("That link code is not valid (wrong, used or expired). In Navi open Notifications → Telegram → "
              "Link a Telegram chat for a new one, then send /link CODE here.")
TOO_MANY = "Too many wrong link codes from this chat: wait 10 minutes, then send /link CODE with a new code."


class LinkRefused(Exception):
    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.reply = reply


def normalize_code(raw: str) -> str:
    return "".join(ch for ch in raw.upper() if ch.isalnum())


def link_code_create(*, user: Any) -> tuple[str, int]:
    """A new one-time code for ``user`` (older unused codes stop working). Returns (code, seconds valid)."""
    raw = "".join(secrets.choice(_ALPHABET) for _ in range(8))
    now = timezone.now()
    with transaction.atomic():
        LinkCode.objects.filter(user=user, used_at__isnull=True).delete()
        LinkCode.objects.create(user=user, code_hash=hash_code(raw), expires_at=now + LINK_CODE_TTL)
    return f"{raw[:4]}-{raw[4:]}", int(LINK_CODE_TTL.total_seconds())


def link_consume(*, chat_id: int, chat_title: str, code: str) -> TelegramLink:
    """Link ``chat_id`` to the account whose code this is. Raises LinkRefused (wrong/used/expired
    code, too many guesses)."""
    now = timezone.now()
    if FailedLinkAttempt.objects.filter(chat_id=chat_id, at__gt=now - LINK_CODE_TTL).count() >= MAX_WRONG_CODES:
        raise LinkRefused(TOO_MANY)
    digest = hash_code(normalize_code(code))
    with transaction.atomic():
        used = LinkCode.objects.filter(code_hash=digest, used_at__isnull=True, expires_at__gt=now).update(used_at=now)
        row = LinkCode.objects.filter(code_hash=digest, used_at=now).first() if used else None
        if row is not None:
            link, _ = TelegramLink.objects.update_or_create(
                chat_id=chat_id, defaults={"user_id": row.user_id, "chat_title": chat_title[:200], "linked_at": now,
                                           "session": None})
    if row is None:  # recorded outside the transaction: the refusal must not roll it back
        FailedLinkAttempt.objects.create(chat_id=chat_id, at=now)
        log.info("telegram_link_refused", chat_id=chat_id)
        raise LinkRefused(WRONG_CODE)
    FailedLinkAttempt.objects.filter(chat_id=chat_id).delete()
    log.info("telegram_linked", chat_id=chat_id, user_id=row.user_id)
    return link


def link_for_chat(*, chat_id: int) -> TelegramLink | None:
    """The chat's link if its user may still use Navi."""
    return TelegramLink.objects.select_related("user", "session").filter(chat_id=chat_id, user__is_active=True).first()


def link_revoke(*, user: Any, link_id: int) -> None:
    """Unlink one of the user's chats. Raises NotFound."""
    deleted, _ = TelegramLink.objects.filter(user=user, pk=link_id).delete()
    if not deleted:
        raise NotFound("No such linked Telegram chat on your account.")


def unlink_chat(*, chat_id: int) -> bool:
    deleted, _ = TelegramLink.objects.filter(chat_id=chat_id).delete()
    return bool(deleted)


def chat_session(*, link: TelegramLink, new: bool = False) -> Any:
    """The session the chat talks to: its current one, or a new "Telegram" session (``new``, or
    when the current one was deleted)."""
    from sessions_app.hooks import run_session_created_hooks
    from sessions_app.services import session_create

    if link.session is not None and not new:
        return link.session
    session = session_create(owner=link.user, title="Telegram")
    run_session_created_hooks(session)
    link.session = session
    link.save(update_fields=["session"])
    return session


def links_of(*, user: Any) -> list[TelegramLink]:
    return list(TelegramLink.objects.filter(user=user))
