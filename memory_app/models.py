"""Long-term memory: facts about a user, their history, the narrative summary, extraction state.

Everything is per user: nobody reads another user's memory (DESIGN.md §3).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

# Categories the extraction prompt offers; anything else the model invents becomes "other".
CATEGORIES: tuple[str, ...] = (
    "preferences", "projects", "environment", "people", "personal", "work", "health", "other",
)


class MemoryFact(models.Model):
    """One durable fact about a user, unique per (user, category, key)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_facts")
    category = models.CharField(max_length=40, default="other")
    key = models.CharField(max_length=100)
    value = models.TextField()
    source_session = models.ForeignKey(
        "sessions_app.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source_message = models.ForeignKey(
        "sessions_app.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confidence = models.FloatField(default=1.0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_facts"
        constraints = [
            models.UniqueConstraint(fields=["user", "category", "key"], name="memory_fact_user_category_key"),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0.0) & models.Q(confidence__lte=1.0),
                name="memory_fact_confidence_0_1",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "-updated_at"], name="memory_fact_user_updated"),
            models.Index(fields=["user", "category", "-updated_at"], name="memory_fact_user_cat_updated"),
        ]

    def __str__(self) -> str:
        return f"{self.category}/{self.key} = {self.value[:60]}"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


class MemoryFactChange(models.Model):
    """A fact's value was replaced. Deleted with the fact: forgetting leaves no trace."""

    class Reason(models.TextChoices):
        CONTRADICTED = "contradicted", "contradicted in a conversation"
        USER_REQUEST = "user request", "saved at the user's request"
        USER_EDIT = "user edit", "edited by the user"

    fact = models.ForeignKey(MemoryFact, on_delete=models.CASCADE, related_name="changes")
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    session = models.ForeignKey(
        "sessions_app.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=20, choices=Reason.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_fact_changes"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["fact", "-created_at"], name="memory_change_fact_created")]

    def __str__(self) -> str:
        return f"{self.reason}: {self.old_value[:40]} → {self.new_value[:40]}"


class MemorySummary(models.Model):
    """The narrative summary injected into every run; one row per user."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_summary")
    text = models.TextField(blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # Fingerprint of the facts the text was built from: a rebuild with the same facts is skipped.
    facts_version = models.CharField(max_length=64, blank=True)
    # Facts changed since the text was built (set by every fact write, cleared by a rebuild).
    stale = models.BooleanField(default=False)

    class Meta:
        db_table = "memory_summary"
        verbose_name_plural = "memory summaries"

    def __str__(self) -> str:
        return f"Memory summary of {self.user}"


class SessionMemoryState(models.Model):
    """How far a session's messages were mined for facts, and the claim of the worker doing it."""

    session = models.OneToOneField("sessions_app.Session", on_delete=models.CASCADE, related_name="memory_state")
    extracted_up_to_seq = models.PositiveBigIntegerField(default=0)
    extracted_at = models.DateTimeField(null=True, blank=True)
    # Consecutive failed runs (reset by a success) and the last failure.
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    attempted_at = models.DateTimeField(null=True, blank=True)
    # Lease of the worker extracting right now: a redelivered task finds it and does nothing.
    claim_token = models.CharField(max_length=32, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "session_memory_state"

    def __str__(self) -> str:
        return f"{self.session_id} up to #{self.extracted_up_to_seq}"
