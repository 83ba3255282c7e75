"""Request and response schemas of the memory API."""
from __future__ import annotations

from datetime import datetime

from ninja import Schema
from pydantic import Field

from memory_app.normalize import MAX_KEY, MAX_VALUE


class SourceOut(Schema):
    session_id: str
    session_title: str
    message_seq: int | None
    message_role: str | None
    excerpt: str
    stated_at: datetime | None


class FactOut(Schema):
    id: int
    category: str
    key: str
    value: str
    confidence: float
    source_session_id: str | None
    source: SourceOut | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


class FactPage(Schema):
    items: list[FactOut]
    total: int
    limit: int
    offset: int


class FactPatchIn(Schema):
    value: str | None = Field(default=None, max_length=MAX_VALUE)
    category: str | None = Field(default=None, max_length=40)
    key: str | None = Field(default=None, max_length=MAX_KEY)
    expires_at: datetime | None = Field(default=None, description="null clears the expiry")


class SummaryOut(Schema):
    summary: str
    updated_at: datetime | None
    fact_count: int


class OkOut(Schema):
    ok: bool = True
