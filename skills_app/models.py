"""Skill proposals: a SKILL.md the agent wrote with skill_write, waiting for its user's decision.

Skills themselves are folders on disk (``skills_app.store``); only the proposals live in the
database, because they belong to a user and a session like messages do.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models


class SkillProposal(models.Model):
    class Status(models.TextChoices):
        # Written during a turn; shown only if that turn ends well (a final answer), else dropped.
        DRAFT = "draft"
        PENDING = "pending"
        ACCEPTED = "accepted"
        DISCARDED = "discarded"
        DROPPED = "dropped"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="skill_proposals")
    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="skill_proposals")
    profile_id = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    content = models.TextField(help_text="The proposed SKILL.md (front matter and instructions).")
    note = models.TextField(blank=True, help_text="What the agent said the skill is for or what it changes.")
    # What the proposal updates when accepted: a version number, "bundled", or "" for a new skill.
    updates = models.CharField(max_length=16, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    # The seq of the session's last message when the proposal was made: the turn it belongs to
    # is the messages after it, up to the next user message.
    after_seq = models.PositiveBigIntegerField(default=0)
    version = models.PositiveIntegerField(null=True, blank=True, help_text="The version saved on accept.")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["session", "status"], name="skillproposal_session_status")]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"
