"""User tool: a persistent personal notes store, one notebook per user.

Stored in ``DATA_DIR/user_notes.json``; every change is a locked read-modify-write
(a thread lock within the process, ``flock`` across processes) ending in an atomic
replace, so concurrent runs never lose or tear a note.
"""
import asyncio
import fcntl
import json
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from agent.ctx import current_user_id
from agent.ports import SUMMARY, Doubt
from tools_app.base import (
    QUESTION_STORED,
    ToolError,
    ToolResult,
    content_words,
    kept_not_scheduled,
    takes_a_word,
    the_question,
    the_whole_message,
)
from tools_app.fileio import atomic_write_json, path_lock

name = "user_notes"
description = (
    "Keep the user's notes (add, list, search, delete); not for reminders or to-do lists. Notes are "
    "kept across sessions; each user sees only their own. action=add saves "
    "'text' (optional 'tags'); action=list shows the most recent notes; action=search finds notes containing "
    "every word of 'query' (in text or tags); action=delete removes the note with 'id'. Use it when the user "
    "asks you to note something down or to look up something they noted."
)
records = True  # notes are words kept: a note naming a file has not read it (tools_app.loader)
parameters = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "list", "search", "delete"], "description": "What to do."},
        "text": {"type": "string", "description": "For add: the note."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "For add: optional short tags."},
        "query": {"type": "string", "description": "For search: words to look for."},
        "id": {"type": "integer", "description": "For delete: the note id shown by list/search."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "For list/search: max notes (20)."},
    },
    "required": ["action"],
    "allOf": [
        {"if": {"properties": {"action": {"const": "add"}}}, "then": {"required": ["text"], "properties": {"tags": {}}}},
        {"if": {"properties": {"action": {"const": "search"}}}, "then": {"required": ["query"]}},
        {"if": {"properties": {"action": {"const": "delete"}}}, "then": {"required": ["id"]}},
    ],
}

MAX_TEXT = 5000
MAX_NOTES = 2000


def _path() -> Path:
    return Path(settings.DATA_DIR) / "user_notes.json"


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"users": {}}
    except ValueError:
        raise ToolError("the notes file is damaged; ask an administrator to check user_notes.json") from None
    return data if isinstance(data, dict) and isinstance(data.get("users"), dict) else {"users": {}}


def _render(notes: list) -> str:
    lines = []
    for note in notes:
        tags = f" [{', '.join(note['tags'])}]" if note.get("tags") else ""
        lines.append(f"#{note['id']} ({note['created_at'][:16].replace('T', ' ')} UTC){tags}: {note['text']}")
    return "\n".join(lines)


def _matches(note: dict, words: list) -> bool:
    haystack = (note["text"] + " " + " ".join(note.get("tags", []))).lower()
    return all(word in haystack for word in words)


def _apply(book: dict, params: dict) -> tuple:
    """(output, changed) for one action on one user's notebook."""
    action, notes = params["action"], book["notes"]
    limit = params.get("limit") or 20
    if action == "add":
        text = (params.get("text") or "").strip()
        if not text:
            raise ToolError("action=add needs 'text'")
        if len(text) > MAX_TEXT or len(notes) >= MAX_NOTES:
            raise ToolError(f"notes are limited to {MAX_TEXT} characters and {MAX_NOTES} per user")
        tags = [t.strip() for t in params.get("tags") or [] if t.strip()][:10]
        note = {"id": book["next_id"], "text": text, "tags": tags, "created_at": datetime.now(UTC).isoformat()}
        book["next_id"] += 1
        notes.append(note)
        return f"Saved note #{note['id']}.", True
    if action == "delete":
        if params.get("id") is None:
            raise ToolError("action=delete needs 'id' (see action=list)")
        kept = [n for n in notes if n["id"] != params["id"]]
        if len(kept) == len(notes):
            raise ToolError(f"there is no note #{params['id']}")
        book["notes"] = kept
        return f"Deleted note #{params['id']}.", True
    if action == "search":
        words = (params.get("query") or "").lower().split()
        if not words:
            raise ToolError("action=search needs 'query'")
        found = [n for n in notes if _matches(n, words)][-limit:]
        return (_render(found) if found else f"No note matches {params['query']!r}."), False
    return (_render(notes[-limit:]) if notes else "No notes yet."), False


def _run(user_key: str, params: dict) -> str:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path_lock(path), open(path.with_suffix(".lock"), "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        data = _load(path)
        book = data["users"].setdefault(user_key, {"next_id": 1, "notes": []})
        output, changed = _apply(book, params)
        if changed:
            atomic_write_json(path, data)
        return output


async def execute(params: dict) -> ToolResult:
    user_id = current_user_id.get()
    if user_id is None:
        raise ToolError("notes belong to a signed-in user, and this run has none")
    output = await asyncio.to_thread(_run, str(user_id), params)
    # What the user reads if a small model gives no answer in words (``agent.ports.SUMMARY``): the note itself.
    added = " ".join(str(params.get("text") or "").split()) if params.get("action") == "add" else ""
    return ToolResult(success=True, output=output, metadata={SUMMARY: f"Noted: {added}"} if added else {})


def doubt(params: dict, request: str) -> Doubt | None:
    """A note that is the user's question itself (``the_question``) is nothing they asked to keep; nor, held
    loosely, is a note that takes no word or number of the user's words, as with a fact or a todo list: the
    1.5B noted "Hello! I'm here to help." for "Hi there! Hope all is well." (round 18); nor, loosely, a note
    that is the user's whole message (``the_whole_message``: no word of it is left to ask for a note; round 19).
    Advisory: a note of something said in an earlier message ("Note that down.") is added when the call is made
    again. Loosely too, a note for a request that says when something is to happen ("in 3 minutes", "hourly":
    ``kept_not_scheduled``)."""
    text = str(params.get("text") or "") if params.get("action") == "add" else ""
    if the_question(text, request):
        return Doubt(reason=QUESTION_STORED.format(what=f"The note {text[:160]!r}"), answer=True)
    if text and the_whole_message(text, request):
        return Doubt(reason=f"the note {text[:120]!r} is the user's whole message ({request[:160]!r}), and nothing in "
                            "it asks for a note, so it was not added. Note only what the user asks you to note; "
                            "otherwise answer them.",
                     answer=True, repeated_runs=True)
    if not request.strip() or not content_words(text) or takes_a_word(text, request):
        return kept_not_scheduled(request, [text], what="a note", done="added", keep="add a note")
    return Doubt(reason=f"the note {text[:120]!r} is nothing the user's words ({request[:160]!r}) say, so it was "
                        "not added. Note only what the user asked you to; if they asked something, answer it.",
                 answer=True, repeated_runs=True)
