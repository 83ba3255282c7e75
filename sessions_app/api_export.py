"""REST: GET /sessions/{id}/export (Markdown, JSON, HTML; streamed) and POST /sessions/import."""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query, Router, Status

from navi_site.errors import PayloadTooLarge
from navi_site.http_loop import streamed_on_loop
from sessions_app import services
from sessions_app.export import ExportContext, export_chunks, export_filename, import_session, parse_import
from sessions_app.export.importer import max_bytes
from sessions_app.export.reader import CONTENT_TYPES, last_turn_events
from sessions_app.schemas import ErrorOut

router = Router(tags=["sessions"])

_END = object()


async def _aiter(chunks: Iterator[str]) -> AsyncIterator[bytes]:
    """Under ASGI: each page is read and rendered in the sync thread, one at a time (Django would
    otherwise read a sync iterator to its end before sending anything)."""
    step = sync_to_async(next, thread_sensitive=True)
    while True:
        chunk = await step(chunks, _END)
        if chunk is _END:
            return
        yield chunk.encode()


@router.get("/{session_id}/export", response={200: None, 404: ErrorOut},
            summary="Download the conversation as Markdown, JSON (re-importable) or a self-contained HTML page")
def export_session(request: HttpRequest, session_id: str,
                   format: Literal["md", "json", "html"] = Query("md")) -> StreamingHttpResponse:  # noqa: A002
    from agent import ports

    session = services.session_access(user=request.user, session_id=session_id)
    ctx = ExportContext(session=session, todo=list(ports.todo().read(str(session.id))),
                        events=last_turn_events(str(session.id)) if format == "json" else None)
    chunks = export_chunks(ctx, format)
    content = _aiter(chunks) if streamed_on_loop(request) else (c.encode() for c in chunks)
    response = StreamingHttpResponse(content, content_type=CONTENT_TYPES[format])
    response["Content-Disposition"] = f'attachment; filename="{export_filename(session, format)}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


_JSON_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "A file made by GET /sessions/{id}/export?format=json",
    "required": ["format", "version", "session", "messages"]}}}}}


@router.post("/import", response={201: dict[str, Any], 400: ErrorOut, 413: ErrorOut}, openapi_extra=_JSON_BODY,
             summary="Import a Navi JSON export as a new session")
def import_export(request: HttpRequest) -> Status:
    limit = max_bytes()
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"The file is too large to import (more than {limit // (1024 * 1024)} MB): "
                              "split the conversation or raise SESSION_IMPORT_MAX_MB.")
    raw = request.read(limit + 1)  # not request.body: its own, lower limit would answer first
    export = parse_import(raw)
    session = import_session(owner=request.user, export=export)
    return Status(201, {"session_id": str(session.id), "title": session.title, "profile_id": session.profile_id,
                        "messages": len(export.messages)})
