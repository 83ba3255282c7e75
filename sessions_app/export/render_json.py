"""JSON export (format "navi.session", version 1): streamed, one page of messages per chunk.

    {"format": "navi.session", "version": 1, "exported_at": …,
     "session": {"id", "title", "profile_id", "pinned", "created_at", "last_active"},
     "plan": {"todo": [{"title", "status"}…]},
     "last_turn": {"available": bool, "events": [{…, "seq": N}…]},
     "messages": [{"seq", "role", "content", "images", "tool_calls", "tool_call_id", "name", "thinking",
                   "is_plan", "is_summary", "is_recall", "is_compression", "interrupted", "metadata",
                   "created_at"}…]}
"""
from __future__ import annotations

from typing import Any

import orjson

from sessions_app.export.reader import EXPORT_FORMAT, EXPORT_VERSION, ExportContext
from sessions_app.models import Message

_OPTS = orjson.OPT_NON_STR_KEYS


def message_dict(m: Message) -> dict[str, Any]:
    return {"seq": m.seq, "role": m.role, "content": m.content, "images": m.images, "tool_calls": m.tool_calls,
            "tool_call_id": m.tool_call_id or None, "name": m.name or None, "thinking": m.thinking,
            "is_plan": m.is_plan, "is_summary": m.is_summary, "is_recall": m.is_recall,
            "is_compression": m.is_compression, "interrupted": m.interrupted, "metadata": m.metadata,
            "created_at": m.created_at.isoformat()}


def head(ctx: ExportContext) -> str:
    s = ctx.session
    front = {
        "format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exported_at": ctx.exported_at.isoformat(),
        "session": {"id": str(s.id), "title": s.title, "profile_id": s.profile_id, "pinned": s.pinned,
                    "created_at": s.created_at.isoformat(), "last_active": s.last_active.isoformat()},
        "plan": {"todo": ctx.todo},
        "last_turn": {"available": ctx.events is not None, "events": ctx.events or []},
    }
    text = orjson.dumps(front, default=str, option=_OPTS).decode()
    return text[:-1] + ',"messages":['


def page(ctx: ExportContext, rows: list[Message], *, first: bool) -> str:
    body = ",".join(orjson.dumps(message_dict(m), default=str, option=_OPTS).decode() for m in rows)
    return body if first else "," + body


def tail(ctx: ExportContext, *, empty: bool) -> str:
    return "]}\n"
