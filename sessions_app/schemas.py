"""Request and response schemas of the sessions API."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field


class SessionCreateIn(Schema):
    profile_id: str | None = Field(default=None, max_length=64, description="Profile; default: secretary")
    title: str = Field(default="", max_length=200)


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


class PinIn(Schema):
    pinned: bool


class SessionPatchIn(Schema):
    title: str | None = Field(default=None, max_length=200)
    pinned: bool | None = None


class OkOut(Schema):
    ok: bool = True
