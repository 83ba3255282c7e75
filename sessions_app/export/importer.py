"""Import of Navi's own JSON export (format "navi.session", version 1) as a new session.

Everything is checked before anything is written; then the session and its messages are created
in one transaction (the search index follows by itself: sessions_app/search/schema.py).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import orjson
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from navi_site.errors import BadRequest, PayloadTooLarge
from profiles_app.models import AgentProfile
from sessions_app import services
from sessions_app.export.reader import EXPORT_FORMAT, EXPORT_VERSION
from sessions_app.models import Message, Session

MAX_MESSAGES = 100_000
MAX_PLAN_STEPS = 50  # the todo list's own limit
BATCH = 500
# Keys of a message's metadata that name other rows of the exported session by their seq (the
# versions of an edited exchange): an import holds only the shown version, renumbered.
SESSION_BOUND_METADATA = ("branch_group", "archived_buffer")


def _no_nul(value: Any) -> Any:
    return value.replace("\x00", "") if isinstance(value, str) else value


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "tool", "system"]
    content: str | None = Field(default=None, max_length=2_000_000)
    images: list[str] = Field(default_factory=list, max_length=16)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, max_length=64)
    tool_call_id: str | None = Field(default=None, max_length=100)
    name: str | None = Field(default=None, max_length=200)
    thinking: str | None = Field(default=None, max_length=2_000_000)
    is_plan: bool = False
    is_summary: bool = False
    is_recall: bool = False
    is_compression: bool = False
    interrupted: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None

    _clean = field_validator("content", "thinking", "tool_call_id", "name", mode="before")(_no_nul)


class SessionIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(default="", max_length=200)
    profile_id: str | None = Field(default=None, max_length=64)
    pinned: bool = False

    _clean = field_validator("title", "profile_id", mode="before")(_no_nul)


class StepIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1, max_length=300)
    status: Literal["pending", "in_progress", "done", "failed"] = "pending"
    validation: str | None = Field(default=None, max_length=1000)
    note: str | None = Field(default=None, max_length=1000)

    _clean = field_validator("title", "validation", "note", mode="before")(_no_nul)


class PlanIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    todo: list[StepIn] = Field(default_factory=list, max_length=MAX_PLAN_STEPS)


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: str
    version: int
    session: SessionIn
    messages: list[MessageIn] = Field(max_length=MAX_MESSAGES)
    plan: PlanIn = Field(default_factory=PlanIn)


def max_bytes() -> int:
    return int(getattr(settings, "SESSION_IMPORT_MAX_MB", 20)) * 1024 * 1024


def parse_import(raw: bytes) -> ExportIn:
    """The validated export. Raises PayloadTooLarge or BadRequest saying what is wrong."""
    limit = max_bytes()
    if len(raw) > limit:
        raise PayloadTooLarge(f"The file is too large to import (more than {limit // (1024 * 1024)} MB): "
                              "split the conversation or raise SESSION_IMPORT_MAX_MB.")
    if not raw.strip():
        raise BadRequest("The import is empty: send the JSON file of a Navi export (format=json).")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"The file is not valid JSON ({exc}): send a Navi JSON export, unchanged.") from None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise BadRequest(f"This is not a Navi conversation export (\"format\" is {found!r}, expected "
                         f"{EXPORT_FORMAT!r}): only files made by Navi's export (format=json) can be imported.")
    version = data.get("version")
    if version != EXPORT_VERSION:
        raise BadRequest(f"This export has version {version!r}; this Navi imports version {EXPORT_VERSION}. "
                         "Import it into the Navi version that made it, or export it again.")
    try:
        return ExportIn.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise BadRequest(f"The export is damaged: {problems}{more}. Nothing was imported.") from None


def _profile_id(wanted: str | None) -> str | None:
    """The export's profile if it exists here and is active, else the default one."""
    if wanted and AgentProfile.objects.filter(pk=wanted, is_active=True).exists():
        return wanted
    return None


def import_session(*, owner: Any, export: ExportIn) -> Session:
    """Create a new session holding the export's messages (renumbered from 1) and its plan's todo
    list, in one transaction (the todo list is written last: if it cannot be, nothing is created)."""
    from agent import ports

    now = timezone.now()
    with transaction.atomic():
        session = services.session_create(owner=owner, profile_id=_profile_id(export.session.profile_id),
                                           title=export.session.title)
        batch: list[Message] = []
        last = session.created_at
        for seq, m in enumerate(export.messages, start=1):
            created = m.created_at or now
            last = max(last, created)
            batch.append(Message(
                session=session, seq=seq, buffer=Message.Buffer.BOTH, role=m.role, content=m.content,
                images=m.images, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id or "", name=m.name or "",
                thinking=m.thinking, is_plan=m.is_plan, is_summary=m.is_summary, is_recall=m.is_recall,
                is_compression=m.is_compression, interrupted=m.interrupted,
                metadata={**{k: v for k, v in m.metadata.items() if k not in SESSION_BOUND_METADATA},
                          "imported": True}, created_at=created))
            if len(batch) >= BATCH:
                Message.objects.bulk_create(batch)
                batch = []
        if batch:
            Message.objects.bulk_create(batch)
        Session.objects.filter(pk=session.pk).update(next_seq=len(export.messages) + 1, pinned=export.session.pinned,
                                                     last_active=last)
        if export.plan.todo:
            ports.todo().restore(str(session.id), [step.model_dump() for step in export.plan.todo])
    session.refresh_from_db()
    return session
