"""HTML export: one self-contained page (inline CSS, images as data: URIs, no script, no external
asset; a Content-Security-Policy forbids loading anything). Markdown is rendered by markdown-it
with raw HTML off, so what a message says is shown, never run."""
from __future__ import annotations

import base64
import binascii
import json
from html import escape

from markdown_it import MarkdownIt

from sessions_app.export.reader import ExportContext
from sessions_app.frames import image_kind
from sessions_app.models import Message

# Images by URL would be external assets: off (attached images are embedded as data: URIs).
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"]).disable("image")
MAX_TOOL_CHARS = 20_000
WHO = {"user": "You", "assistant": "Navi", "tool": "Tool", "system": "System"}

CSS = """
:root{color-scheme:light dark;--bg:#f6f7f9;--card:#fff;--text:#1d2230;--muted:#6a7180;--line:#e3e6eb;--accent:#4f6bed}
@media (prefers-color-scheme:dark){:root{--bg:#14161b;--card:#1d2027;--text:#e7e9ee;--muted:#9aa1ad;--line:#2c3039}}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--text);font:16px/1.55 system-ui,-apple-system,"Segoe UI",sans-serif}
main{max-width:860px;margin:0 auto;padding:2rem 1rem 4rem}h1{font-size:1.6rem;margin:0 0 .25rem}
.meta{color:var(--muted);font-size:.85rem;margin:0 0 1.5rem}.msg{background:var(--card);border:1px solid var(--line);
border-radius:12px;padding:.8rem 1rem;margin:.75rem 0}.msg.user{border-left:4px solid var(--accent)}
.who{font-weight:600;font-size:.85rem;color:var(--muted);margin-bottom:.35rem}.who time{font-weight:400}
pre{background:rgba(127,127,127,.12);padding:.6rem .8rem;border-radius:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em}details{margin:.4rem 0}summary{cursor:pointer;color:var(--muted)}
img{max-width:100%;border-radius:8px}table{border-collapse:collapse}td,th{border:1px solid var(--line);padding:.25rem .5rem}
.plan ol{margin:.25rem 0 0 1.25rem;padding:0}.done{text-decoration:line-through;color:var(--muted)}
"""


def _image(b64: str) -> str:
    try:
        kind = image_kind(base64.b64decode(b64[:64] + "=" * (-len(b64[:64]) % 4)))
    except (binascii.Error, ValueError):
        kind = None
    if kind is None:
        return ""
    return f'<img alt="attached image" src="data:image/{kind};base64,{escape(b64, quote=True)}">'


def head(ctx: ExportContext) -> str:
    s = ctx.session
    title = escape(s.title or "Conversation")
    todo = ""
    if ctx.todo:
        items = "".join(f'<li class="{"done" if t.get("status") == "completed" else ""}">{escape(str(t.get("title", "")))}</li>'
                        for t in ctx.todo)
        todo = f'<section class="msg plan"><div class="who">Plan</div><ol>{items}</ol></section>'
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title} · Navi</title>"
        f"<style>{CSS}</style></head><body><main>"
        f"<h1>{title}</h1><p class=\"meta\">Exported from Navi on {ctx.exported_at:%Y-%m-%d %H:%M} UTC · "
        f"profile {escape(s.profile_id)} · started {s.created_at:%Y-%m-%d %H:%M} UTC</p>{todo}\n"
    )


def _message(m: Message) -> str:
    when = f'<time datetime="{m.created_at.isoformat()}">{m.created_at:%Y-%m-%d %H:%M}</time>'
    if m.role == "tool":
        result = m.content or ""
        if len(result) > MAX_TOOL_CHARS:
            result = result[:MAX_TOOL_CHARS] + f"\n… ({len(m.content or '') - MAX_TOOL_CHARS} more characters)"
        return (f'<section class="msg tool" id="m{m.seq}"><details><summary>Tool result · '
                f'<code>{escape(m.name or "tool")}</code> · {when}</summary><pre>{escape(result)}</pre></details></section>\n')
    label = "Plan" if m.is_plan else WHO.get(m.role, m.role)
    parts = [f'<section class="msg {escape(m.role)}" id="m{m.seq}"><div class="who">{label} · {when}'
             f'{" · recall" if m.is_recall else ""}{" · interrupted" if m.interrupted else ""}</div>']
    if m.thinking:
        parts.append(f"<details><summary>Reasoning</summary><pre>{escape(m.thinking)}</pre></details>")
    if m.content:
        parts.append(_MD.render(m.content))
    parts += [_image(str(b64)) for b64 in (m.images or [])]
    for call in m.tool_calls or []:
        args = json.dumps(call.get("arguments") or {}, ensure_ascii=False, indent=1)
        parts.append(f"<details><summary>Tool call · <code>{escape(str(call.get('name', 'tool')))}</code></summary>"
                     f"<pre>{escape(args)}</pre></details>")
    return "".join(parts) + "</section>\n"


def page(ctx: ExportContext, rows: list[Message], *, first: bool) -> str:
    return "".join(_message(m) for m in rows)


def tail(ctx: ExportContext, *, empty: bool) -> str:
    return ("<p class=\"meta\">No messages.</p>" if empty else "") + "</main></body></html>\n"
