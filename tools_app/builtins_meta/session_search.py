"""``session_search``: the agent looks up the user's past conversations (issue 22).

Read-only, over the user's own sessions only (the run's user), and compact: a small model gets
titles, dates and one-line snippets grouped by conversation, not whole messages. A snippet of a past
tool result is text from outside (a web page, a file, an HTTP body) and may carry instructions: when
one is returned the turn is tainted (``untrusted_source``), so the exfiltration guard asks before
anything leaves, as it would after reading that page itself.
"""
from __future__ import annotations

from typing import Any, ClassVar

from asgiref.sync import sync_to_async

from agent.ctx import current_session_id, current_user_id
from navi_site.errors import BadRequest
from tools_app.base import Tool, ToolError, ToolResult

DEFAULT_HITS = 6
MAX_HITS = 12
ROLE_LABEL = {"user": "user", "assistant": "you"}


def _render(q: str, result: Any, *, skip_session: str | None, limit: int) -> tuple[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    titles: dict[str, tuple[str, str]] = {}
    for hit in result.messages:
        if hit.session_id == skip_session:
            continue
        if sum(len(g) for g in groups.values()) >= limit:
            break
        groups.setdefault(hit.session_id, []).append(hit)
        titles.setdefault(hit.session_id, (hit.session_title, hit.created_at.date().isoformat()))
    for t in result.sessions:
        if t.session_id != skip_session and t.session_id not in titles and len(titles) < limit:
            titles[t.session_id] = (t.title, t.last_active.date().isoformat())
            groups.setdefault(t.session_id, [])
    if not titles:
        return f"No past conversation mentions {q!r}. Try other or fewer words.", []
    lines = [f"Past conversations matching {q!r}, best first:"]
    for sid, hits in groups.items():
        title, day = titles[sid]
        lines.append(f'- "{title or "Untitled"}" ({day}, session {sid[:8]})'
                     + ("" if hits else ": the title matches"))
        for hit in hits:
            who = ROLE_LABEL.get(hit.role) or (f"tool {hit.name}" if hit.name else "tool")
            lines.append(f"  {hit.created_at.date().isoformat()} {who}: {hit.snippet.text}")
    return "\n".join(lines), [hit for hits in groups.values() for hit in hits]


class SessionSearchTool(Tool):
    name: ClassVar[str] = "session_search"
    description: ClassVar[str] = (
        "Search the user's past conversations with you (titles, what the user and you wrote, tool results). "
        "Use it when the user refers to something discussed before (\"what did we decide about the backup?\", "
        "\"the recipe from last week\"). Give 'query' as a few distinctive words; every word must occur. "
        "Returns the matching conversations with dates and one-line snippets, best first."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "A few words to find, e.g. 'backup nas'."},
            "limit": {"type": "integer", "description": f"How many snippets at most (default {DEFAULT_HITS}, "
                                                        f"max {MAX_HITS})."},
        },
        "required": ["query"],
    }
    timeout: ClassVar[float] = 20.0
    max_output_chars: ClassVar[int] = 6_000

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        q = str(params.get("query") or "").strip()
        user_id = current_user_id.get()
        if user_id is None:
            raise ToolError("there is no user in this run, so there are no conversations to search")
        try:
            limit = max(1, min(MAX_HITS, int(params.get("limit") or DEFAULT_HITS)))
        except (TypeError, ValueError):
            limit = DEFAULT_HITS
        return await sync_to_async(_search, thread_sensitive=False)(q, user_id, current_session_id.get(), limit)


def _search(q: str, user_id: int, session_id: str | None, limit: int) -> ToolResult:
    from sessions_app.search import search

    try:
        # Hits in the conversation that is running are already in the context: ask for more, skip them.
        result = search(user_id=user_id, q=q, limit=limit * 3)
    except BadRequest as exc:
        raise ToolError(f"{exc.message} Give 'query' as a few plain words.") from None
    text, shown = _render(q, result, skip_session=session_id, limit=limit)
    metadata: dict[str, Any] = {"hits": len(shown)}
    if any(hit.role == "tool" for hit in shown):
        metadata["untrusted_source"] = "past tool results (session_search)"
    return ToolResult(success=True, output=text, metadata=metadata)
