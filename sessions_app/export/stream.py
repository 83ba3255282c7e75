"""The export as a stream of text chunks: a head, one chunk per page of messages, a tail."""
from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone

from sessions_app.export import render_html, render_json, render_md
from sessions_app.export.reader import ExportContext, pages


def export_chunks(ctx: ExportContext, fmt: str) -> Iterator[str]:
    """The export as text chunks: a head, one chunk per page of messages, a tail."""
    renderer = {"md": render_md, "json": render_json, "html": render_html}[fmt]
    ctx = ctx if ctx.exported_at is not None else ExportContext(session=ctx.session, todo=ctx.todo, events=ctx.events,
                                                                exported_at=timezone.now())
    yield renderer.head(ctx)
    first = True
    for rows in pages(ctx.session):
        yield renderer.page(ctx, rows, first=first)
        first = False
    yield renderer.tail(ctx, empty=first)
