"""Approvals of tool calls, the admin's per-profile rules, session grants and the audit log (issue 20).

* ``ToolRule``: an admin's decision for a tool (optionally one action of it) on one profile or on
  every profile, plus argument patterns that are always allowed (terminal commands ``df*``).
* ``Approval``: one call waiting for (or past) the user's decision. Exactly one decision counts:
  it is a conditional UPDATE from ``pending`` (services.approval_decide).
* ``SessionGrant``: "approve for this session" — this exact call (tool + arguments) runs without
  asking again in that session.
* ``AuditEntry``: every approval decision and every run of an ask-class tool. It keeps the
  session's id, not a foreign key, so the log outlives a deleted conversation; it is purged after
  AUDIT_RETENTION_DAYS.
"""
from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Decision(models.TextChoices):
    ALLOW = "allow", "allow (run without asking)"
    ASK = "ask", "ask the user"
    DENY = "deny", "deny (never run)"


def _validate_patterns(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError('Must be a JSON list of non-empty patterns, e.g. ["df*", "uptime"].')


class ToolRule(models.Model):
    """An admin's approval rule: the most specific matching rule wins (see approvals_app.policy)."""

    profile = models.ForeignKey("agent.AgentProfile", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="tool_rules", help_text="Empty: every profile.")
    tool = models.CharField(max_length=200, help_text="Tool name, e.g. terminal; a glob such as mcp__* works too.")
    action = models.CharField(
        max_length=40, blank=True,
        help_text="Optional: one action of the tool (filesystem: write, delete…; http_request: POST, PUT…).")
    decision = models.CharField(max_length=8, choices=Decision.choices, default=Decision.ASK)
    allow_patterns = models.JSONField(
        default=list, blank=True, validators=[_validate_patterns],
        help_text='Calls whose main argument matches one of these globs are always allowed, e.g. ["df*", "uptime"] '
                  "for terminal commands (terminal/ssh_exec: command, http_request/web_view: url, filesystem: path, "
                  "code_exec: code).")
    notes = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile_id", "tool", "action"]
        verbose_name = "tool approval rule"
        constraints = [
            models.UniqueConstraint(fields=["profile", "tool", "action"], condition=Q(profile__isnull=False),
                                    name="toolrule_one_per_profile_tool_action"),
            models.UniqueConstraint(fields=["tool", "action"], condition=Q(profile__isnull=True),
                                    name="toolrule_one_global_per_tool_action"),
        ]

    def __str__(self) -> str:
        where = self.profile_id or "every profile"
        return f"{self.tool}{'.' + self.action if self.action else ''} → {self.decision} ({where})"

    def clean(self) -> None:
        self.tool = self.tool.strip()
        self.action = self.action.strip()
        if not self.tool:
            raise ValidationError({"tool": "Name the tool, e.g. terminal."})


class Approval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"
        CANCELLED = "cancelled"

    class Scope(models.TextChoices):
        ONCE = "once"
        SESSION = "session", "this exact call for the rest of the session"

    class Origin(models.TextChoices):
        LIVE = "live", "a live turn"
        RECALL = "recall", "a scheduled recall (parked)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="approvals")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="navi_approvals",
                             help_text="The session's owner: the only one who may decide.")
    run_id = models.CharField(max_length=40, blank=True)
    tool = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True, help_text="Why the call needs approval (one line).")
    touches = models.TextField(blank=True, help_text="What the call will touch.")
    tainted_by = models.JSONField(default=list, blank=True, help_text="Untrusted content the turn took in.")
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.LIVE)
    is_subagent = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.ONCE)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decision_reason = models.TextField(blank=True, help_text="The user's reason (the model sees it), or why it ended.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["session", "status"], name="approval_session_status"),
            models.Index(fields=["status", "expires_at"], name="approval_status_expiry"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"


class SessionGrant(models.Model):
    """"Approve for this session": this exact call runs without asking again in the session."""

    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="approval_grants")
    tool = models.CharField(max_length=200)
    digest = models.CharField(max_length=64, help_text="sha256 of the canonical JSON arguments.")
    arguments = models.JSONField(default=dict, blank=True)
    approval = models.ForeignKey(Approval, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "tool", "digest"], name="grant_one_per_call")]

    def __str__(self) -> str:
        return f"{self.tool} in {self.session_id}"


class AuditEntry(models.Model):
    class Kind(models.TextChoices):
        APPROVED = "approved", "approved once"
        APPROVED_SESSION = "approved_session", "approved for the session"
        DENIED = "denied", "denied by the user"
        EXPIRED = "expired", "expired (counts as denied)"
        CANCELLED = "cancelled", "cancelled (Stop)"
        DENIED_UNATTENDED = "denied_unattended", "denied: unattended run"
        DENIED_POLICY = "denied_policy", "denied by an admin rule"
        ALLOWED_RULE = "allowed_rule", "allowed by a rule or pattern"
        ALLOWED_GRANT = "allowed_grant", "allowed: approved earlier for the session"

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="navi_audit_entries", help_text="Whose session the call ran in.")
    session_id = models.UUIDField(null=True, blank=True, db_index=True)
    run_id = models.CharField(max_length=40, blank=True)
    tool = models.CharField(max_length=200, db_index=True)
    arguments = models.JSONField(default=dict, blank=True)
    decision = models.CharField(max_length=20, choices=Kind.choices, db_index=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="Empty: decided by the policy or the clock.")
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    tainted_by = models.JSONField(default=list, blank=True)
    origin = models.CharField(max_length=8, default="live")
    approval_id = models.UUIDField(null=True, blank=True)
    ran = models.BooleanField(default=False, help_text="The call was run.")
    success = models.BooleanField(null=True, blank=True)
    result_excerpt = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["user", "-created_at"], name="audit_user_created")]

    def __str__(self) -> str:
        return f"{self.tool}: {self.decision} at {self.created_at:%Y-%m-%d %H:%M:%S}"
