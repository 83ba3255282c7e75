"""Scheduled recalls (spec 004 ``session_recalls``) and the history of their firings.

Public statuses are the documented ``pending`` / ``fired`` / ``cancelled``. ``firing``
is internal: a worker claimed the occurrence (an atomic conditional UPDATE from
``pending``) and holds a lease (``claimed_until``, renewed while the run lives).
The wire form reports a firing recall as ``pending`` with ``"firing": true``.

One live recall per session, enforced by a partial unique index. "Live" means
``pending``, or ``firing`` *and* recurring: a recurring recall returns to
``pending`` when its run ends, so it keeps its place while it fires (a second
recall scheduled meanwhile is refused), whereas a firing once/immediate recall
ends ``fired``/``cancelled`` and does not block the run from scheduling its own
follow-up ("check again in 10 minutes").
"""
from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone


class Recall(models.Model):
    class CallType(models.TextChoices):
        ONCE = "once"
        RECURRING = "recurring"
        IMMEDIATE = "immediate"

    class Status(models.TextChoices):
        PENDING = "pending"
        FIRING = "firing", "firing (internal: claimed by a worker)"
        FIRED = "fired"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="recalls")
    call_type = models.CharField(max_length=10, choices=CallType.choices)
    trigger_at = models.DateTimeField(help_text="When the next occurrence fires (UTC).")
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    internal_comment = models.TextField(blank=True)
    additional_context_message = models.TextField(help_text="The agent's instruction to itself.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # The claim of the occurrence being fired: who, until when (lease, renewed by a heartbeat).
    claim_token = models.CharField(max_length=32, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    # What an unattended run may do (issue 20): the tools it may use (empty: the profile's tools
    # minus those that always need approval), its limits, and what happens to a call that needs
    # approval: denied (the default) or the run parks until the user decides.
    allowed_tools = models.JSONField(default=list, blank=True,
                                     help_text="Tool allowlist; empty = the profile's tools minus ask-class tools.")
    max_iterations = models.PositiveIntegerField(null=True, blank=True,
                                                 help_text="Caps the profile's max_iterations; empty = the profile's.")
    max_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds of work per run (waiting for approval not counted); "
                                         "empty = RECALL_MAX_SECONDS.")
    on_approval = models.CharField(max_length=8, choices=[("deny", "deny the call"), ("park", "park until approved")],
                                   default="deny", help_text="A call that needs approval in a run of this recall.")
    fire_count = models.PositiveIntegerField(default=0)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status="pending") | Q(status="firing", call_type="recurring"),
                name="recall_one_live_per_session",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "trigger_at"], name="recall_status_trigger"),
            models.Index(fields=["session", "-created_at"], name="recall_session_created"),
        ]

    def __str__(self) -> str:
        return f"{self.call_type} recall {str(self.id)[:8]} ({self.status})"

    @property
    def public_status(self) -> str:
        return self.Status.PENDING if self.status == self.Status.FIRING else self.status


class RecallRun(models.Model):
    """One firing (or deferral) of a recall: when it was due, how it went, what it produced."""

    class Outcome(models.TextChoices):
        RUNNING = "running"
        SUCCESS = "success"
        MAX_ITERATIONS = "max_iterations"
        STOPPED = "stopped"
        ERROR = "error"
        DEFERRED = "deferred"
        CANCELLED_DELETED_SESSION = "cancelled_deleted_session"
        INTERRUPTED = "interrupted"
        WAITING_APPROVAL = "waiting_approval", "waiting for the user's approval (parked)"
        TIME_LIMIT = "time_limit", "stopped at the recall's time limit"

    recall = models.ForeignKey(Recall, on_delete=models.CASCADE, related_name="runs")
    claim_token = models.CharField(max_length=32, blank=True)
    due_at = models.DateTimeField()
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=32, choices=Outcome.choices, default=Outcome.RUNNING)
    error = models.TextField(blank=True)
    # The messages the run appended to the session (Message.seq range, inclusive).
    first_message_seq = models.PositiveBigIntegerField(null=True, blank=True)
    last_message_seq = models.PositiveBigIntegerField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    # The approval a parked run waits for (approvals_app.Approval), while it waits.
    approval_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"run of {self.recall_id} at {self.started_at:%Y-%m-%d %H:%M:%S} ({self.outcome})"

    @property
    def message_count(self) -> int:
        if self.first_message_seq is None or self.last_message_seq is None:
            return 0
        return int(self.last_message_seq - self.first_message_seq + 1)
