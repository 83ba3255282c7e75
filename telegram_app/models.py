"""Telegram chats linked to Navi accounts, and the one-time codes that link them.

A code is shown once in the settings page and stored only as its SHA-256; it expires after
LINK_CODE_TTL and is used up by the first chat that sends it. A link ties one private chat to
one user; the chat's turns run in ``session`` (a "Telegram" session, replaced by /new).
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone


def hash_code(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class LinkCode(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="telegram_codes")
    code_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"link code of {self.user} (until {self.expires_at:%H:%M})"


class TelegramLink(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="telegram_links")
    chat_id = models.BigIntegerField(unique=True)
    chat_title = models.CharField(max_length=200, blank=True)
    session = models.ForeignKey("sessions_app.Session", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="+")
    linked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["linked_at"]

    def __str__(self) -> str:
        return f"Telegram chat {self.chat_title or self.chat_id} of {self.user}"


class FailedLinkAttempt(models.Model):
    """A wrong code sent from a chat: at most MAX_WRONG_CODES per chat in LINK_CODE_TTL."""

    chat_id = models.BigIntegerField(db_index=True)
    at = models.DateTimeField(default=timezone.now)


class ApprovalMessage(models.Model):
    """A chat message that shows an approval card with buttons (telegram_app.approvals): edited to
    show the outcome when the approval ends, wherever it was decided."""

    approval = models.ForeignKey("approvals_app.Approval", on_delete=models.CASCADE, related_name="+")
    chat_id = models.BigIntegerField()
    message_id = models.BigIntegerField()
    text = models.TextField(help_text="The card as sent (the outcome is added below it).")
    settled = models.BooleanField(default=False, help_text="Already shows the outcome.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat_id", "message_id"], name="telegram_approval_message_one")]

    def __str__(self) -> str:
        return f"approval card {self.approval_id} in chat {self.chat_id}"
