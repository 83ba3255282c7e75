"""Sessions, their messages (append-only, two buffers) and personal API tokens (DESIGN.md §3)."""
from __future__ import annotations

import hashlib
import secrets
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class Session(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="navi_sessions")
    profile = models.ForeignKey("agent.AgentProfile", on_delete=models.PROTECT, related_name="sessions")
    title = models.CharField(max_length=200, blank=True)
    pinned = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_active = models.DateTimeField(default=timezone.now)
    context_token_count = models.PositiveIntegerField(default=0)
    # The model chosen in the chat's model picker and the backend that serves it ("ollama", "openai");
    # empty: the profile's model (local_models.choice).
    model = models.CharField(max_length=200, blank=True, default="")
    model_backend = models.CharField(max_length=20, blank=True, default="")
    # Next Message.seq: appending is O(1) whatever the session's length.
    next_seq = models.PositiveBigIntegerField(default=1)

    class Meta:
        indexes = [models.Index(fields=["owner", "-pinned", "-last_active"], name="session_owner_list")]

    def __str__(self) -> str:
        return self.title or f"Session {str(self.id)[:8]}"


class Message(models.Model):
    class Buffer(models.TextChoices):
        BOTH = "both", "display + context"
        MESSAGES = "messages", "display only"
        CONTEXT = "context", "context only"
        # Kept, but neither shown nor sent to the model: an answer that was regenerated.
        ARCHIVED = "archived", "archived (replaced by a regenerated answer)"

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        SYSTEM = "system"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="message_rows")
    seq = models.PositiveBigIntegerField()
    buffer = models.CharField(max_length=8, choices=Buffer.choices, default=Buffer.BOTH)
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(null=True, blank=True)
    images = models.JSONField(default=list, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    name = models.CharField(max_length=200, blank=True)
    thinking = models.TextField(null=True, blank=True)
    is_plan = models.BooleanField(default=False)
    is_summary = models.BooleanField(default=False)
    is_recall = models.BooleanField(default=False)
    is_compression = models.BooleanField(default=False)
    # The turn died before it finished (crash, restart); the next turn repairs the context.
    interrupted = models.BooleanField(default=False)
    run_id = models.CharField(max_length=40, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="message_session_seq")]

    def __str__(self) -> str:
        return f"{self.role} #{self.seq}"


def _hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A personal token for scripts. Only its SHA-256 is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="navi_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="The start of the token, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def issue(cls, *, user: object, name: str = "") -> tuple[ApiToken, str]:
        """Create a token; returns the row and the raw token (never stored)."""
        raw = "navi_" + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, prefix=raw[:12], key_hash=_hash_token(raw))
        return token, raw

    @classmethod
    def lookup(cls, raw: str) -> ApiToken | None:
        """The active token for ``raw``, or None."""
        if not raw or len(raw) > 200:
            return None
        return (
            cls.objects.select_related("user")
            .filter(key_hash=_hash_token(raw), revoked_at__isnull=True, user__is_active=True)
            .first()
        )


class RunningTurn(models.Model):
    """A turn that is running, or whose process died before it ended (DESIGN.md §3).

    Created in the same transaction as the turn's user message and deleted when the turn ends.
    While it runs, the text streamed since the last saved message (``partial_*``) is written
    here at most once a second, and ``alive_until`` is pushed forward (a lease). A row whose
    lease ran out, or whose process is known to be dead, is closed by
    ``sessions_app.turns.turns_recover``: the partial answer becomes an assistant message marked
    ``interrupted`` and tools that never finished get a result saying so (they are not re-run).
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="running_turns")
    run_id = models.CharField(max_length=40, unique=True)
    owner = models.CharField(max_length=200, help_text="host:pid:token of the process running the turn")
    started_at = models.DateTimeField(default=timezone.now)
    alive_until = models.DateTimeField(db_index=True)
    partial_text = models.TextField(blank=True)
    partial_thinking = models.TextField(blank=True)
    partial_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"turn {self.run_id} of {self.session_id}"


class SessionFile(models.Model):
    """A file uploaded into a session (POST /sessions/{id}/files); removed after SESSION_FILES_TTL_HOURS."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="files")
    original_name = models.CharField(max_length=255)
    stored_path = models.CharField(max_length=1024)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["session", "created_at"], name="sessionfile_session")]

    def __str__(self) -> str:
        return self.original_name
