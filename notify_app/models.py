"""Notifications, their deliveries per channel, each user's choices, and Web Push subscriptions.

A ``Notification`` is what happened ("the recall finished: ..."); a ``Delivery`` is one channel's
attempt to bring it to the user, with its own status, attempts and last error, so that a failing
SMTP server is retried without sending the push again. ``dedupe_key`` makes a notification for the
same event (a redelivered task, a retried hook) a no-op.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from notify_app.kinds import CHANNEL_LABELS, KINDS


class Notification(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="navi_notifications")
    kind = models.CharField(max_length=32, choices=[(k, v.label) for k, v in KINDS.items()])
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    session = models.ForeignKey("sessions_app.Session", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="notifications")
    # Extra data a channel may use (an approval's id for inline buttons, the recall id).
    data = models.JSONField(default=dict, blank=True)
    dedupe_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["user", "dedupe_key"], condition=~Q(dedupe_key=""),
                                               name="notification_dedupe")]
        indexes = [models.Index(fields=["user", "-created_at"], name="notification_user_created")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.title}"

    @property
    def url(self) -> str:
        """Where a click leads: the session in the chat UI (relative to the site)."""
        return f"/#{self.session_id}" if self.session_id else "/"


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"  # gave up (permanent error or retries used up); last_error says why
        SKIPPED = "skipped"  # the channel could no longer reach the user (subscription removed, unlinked)

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=16, choices=list(CHANNEL_LABELS.items()))
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["notification", "channel"], name="delivery_one_per_channel")]

    def __str__(self) -> str:
        return f"{self.channel} delivery of #{self.notification_id} ({self.status})"


class Preference(models.Model):
    """A user's choice for one kind on one channel (no row: the kind's default)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="navi_notify_prefs")
    kind = models.CharField(max_length=32, choices=[(k, v.label) for k, v in KINDS.items()])
    channel = models.CharField(max_length=16, choices=list(CHANNEL_LABELS.items()))
    enabled = models.BooleanField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind", "channel"], name="preference_one")]

    def __str__(self) -> str:
        return f"{self.user} {self.kind}/{self.channel}={'on' if self.enabled else 'off'}"


class PushSubscription(models.Model):
    """A browser's Web Push subscription (PushSubscription.toJSON() of the service worker)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="navi_push_subs")
    endpoint = models.URLField(max_length=1000, unique=True)
    p256dh = models.CharField(max_length=200)
    auth = models.CharField(max_length=100)
    user_agent = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_success_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"push subscription of {self.user} ({self.endpoint[:40]}…)"

    def info(self) -> dict[str, object]:
        """The subscription_info pywebpush takes."""
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}
