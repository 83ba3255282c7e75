"""Request and response schemas of the sessions API."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field, field_validator


def _no_nul(value: Any) -> Any:
    """NUL never means anything in text, and PostgreSQL cannot store it: drop it."""
    return value.replace("\x00", "") if isinstance(value, str) else value


class SessionCreateIn(Schema):
    profile_id: str | None = Field(default=None, max_length=64, description="Profile; default: secretary")
    title: str = Field(default="", max_length=200)

    _clean = field_validator("profile_id", "title", mode="before")(_no_nul)


class SessionCreatedOut(Schema):
    session_id: str
    profile_id: str
    created_at: datetime


class SessionOut(Schema):
    id: str
    profile_id: str
    profile_name: str
    title: str
    pinned: bool
    created_at: datetime
    last_active: datetime
    context_token_count: int
    has_pending_recall: bool = False
    busy: bool = False


class SessionPage(Schema):
    items: list[SessionOut]
    total: int
    limit: int
    offset: int


class SessionDetailOut(SessionOut):
    messages: list[dict[str, Any]]
    has_more: bool
    max_context_tokens: int
    pending_steers: list[dict[str, Any]] = Field(default_factory=list,
                                                 description="Messages waiting for the running turn: [{id, content}]")
    model: str = Field(default="", description="The model this session's turns use (see model_source)")
    model_backend: str = ""
    model_source: str = Field(default="profile", description="session (chosen in the picker), profile or default")


class PinIn(Schema):
    pinned: bool


class SessionPatchIn(Schema):
    title: str | None = Field(default=None, max_length=200)
    pinned: bool | None = None

    _clean = field_validator("title", mode="before")(_no_nul)


class OkOut(Schema):
    ok: bool = True


class FileOut(Schema):
    id: str
    name: str
    path: str
    size: int
    content_type: str
    created_at: datetime
    expires_at: datetime


class FileRefIn(Schema):
    id: str | None = Field(default=None, max_length=64)
    name: str | None = Field(default=None, max_length=255)
    path: str | None = Field(default=None, max_length=1024)


class MessageIn(Schema):
    content: str = Field(min_length=1, max_length=100_000, description="The user's message")
    images: list[str] = Field(default_factory=list, max_length=8, description="base64 images (data: prefix ok)")
    files: list[str | FileRefIn] = Field(default_factory=list, max_length=20, description="Upload ids or {name, path}")

    _clean = field_validator("content", mode="before")(_no_nul)


class SteerIn(Schema):
    content: str = Field(description="The message for the running turn (read at its next step)")
    ref: str | None = Field(default=None, max_length=100, description="Your own reference, echoed in steer_queued")


class SteerOut(Schema):
    id: str
    content: str
    status: str = Field(description="queued, or withdrawn")


class EditIn(Schema):
    content: str = Field(description="The new text of your last message (the old version is kept as a branch)")


class BranchOut(Schema):
    group: int = Field(description="The seq of the exchange's first user message")
    index: int = Field(description="This version, 1 = the oldest")
    count: int
    current: bool = Field(description="Whether this is the version the conversation goes on from")
    messages: list[dict[str, Any]]


class MessageOut(Schema):
    content: str
    stopped: bool


class StopOut(Schema):
    ok: bool = True
    stopped: bool


class ErrorOut(Schema):
    detail: str
