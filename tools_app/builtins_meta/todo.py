"""``todo``: the per-session checklist (spec 002), stored in ``<session>/.navi/todo.json``.

The agent loop reads it through ``read_todo`` (anti-stall, adaptive re-plan) and
fills it from the plan with ``set_todo``.
"""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from agent.ports import SUMMARY, Doubt
from tools_app.base import (
    QUESTION_STORED,
    Tool,
    ToolError,
    ToolResult,
    content_words,
    kept_not_scheduled,
    takes_a_word,
    the_question,
    the_whole_message,
)
from tools_app.builtins_meta.session_files import profile_attr, require_session, state_dir
from tools_app.fileio import atomic_write_json, locked_update, path_lock, read_json

StepStatus = Literal["pending", "in_progress", "done", "failed"]
STATUSES: tuple[str, ...] = ("pending", "in_progress", "done", "failed")
MARKS = {"pending": " ", "in_progress": "…", "done": "✓", "failed": "✗"}
MAX_STEPS = 50
MAX_TITLE = 300


def todo_path(session_id: str) -> Path:
    return state_dir(session_id) / "todo.json"


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = read_json(path, {"steps": []})
    except ValueError:
        return []
    steps = data.get("steps") if isinstance(data, dict) else None
    return [s for s in steps if isinstance(s, dict) and "title" in s] if isinstance(steps, list) else []


def _save(path: Path, steps: list[dict[str, Any]]) -> None:
    atomic_write_json(path, {"steps": steps, "updated_at": datetime.now(UTC).isoformat()})


def read_todo(session_id: str) -> list[dict[str, Any]]:
    """The steps of a session's todo list (``title``, ``status``, ``validation``, ``note``); [] if none."""
    path = todo_path(session_id)
    with path_lock(path):
        return _load(path)


def _new_steps(titles: list[str]) -> list[dict[str, Any]]:
    clean = [t.strip()[:MAX_TITLE] for t in titles if isinstance(t, str) and t.strip()]
    if not clean:
        raise ToolError("'steps' must be a non-empty list of step titles")
    if len(clean) > MAX_STEPS:
        raise ToolError(f"at most {MAX_STEPS} steps; merge related steps")
    return [{"title": t, "status": "pending", "validation": None, "note": None} for t in clean]


def set_todo(session_id: str, titles: list[str]) -> list[dict[str, Any]]:
    """Replace a session's todo list with ``titles``, all pending (used by the planner)."""
    steps = _new_steps(titles)
    path = todo_path(session_id)
    with path_lock(path):
        _save(path, steps)
    return steps


def restore_todo(session_id: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Write ``steps`` with their status, validation and note (an imported conversation's plan);
    titles are cleaned as ``set_todo`` cleans them, an unknown status becomes pending."""
    clean = _new_steps([str(s.get("title") or "") for s in steps])
    for step, given in zip(clean, (s for s in steps if str(s.get("title") or "").strip()), strict=True):
        status = given.get("status")
        step["status"] = status if status in STATUSES else "pending"
        for key in ("validation", "note"):
            value = given.get(key)
            step[key] = str(value)[:1000] if value else None
    path = todo_path(session_id)
    with path_lock(path):
        _save(path, clean)
    return clean


def complete_next(session_id: str, evidence: str) -> list[dict[str, Any]]:
    """Mark the first step that is not done or failed as done (the local-model aids' todo progress)."""
    path = todo_path(session_id)
    with path_lock(path):
        steps = _load(path)
        step = next((s for s in steps if s.get("status") not in ("done", "failed")), None)
        if step is not None:
            step["status"], step["validation"] = "done", evidence[:1000]
            _save(path, steps)
    return steps


def render(steps: list[dict[str, Any]]) -> str:
    """The checklist as the model and the user see it."""
    if not steps:
        return "The todo list is empty. Create one with action=set."
    done = sum(1 for s in steps if s.get("status") == "done")
    lines = [f"Todo list ({done}/{len(steps)} done):"]
    for number, step in enumerate(steps, start=1):
        status = step.get("status", "pending")
        line = f"{number}. [{MARKS.get(status, ' ')}] {step['title']}"
        if status == "in_progress":
            line += " (in progress)"
        if step.get("validation"):
            line += f" — evidence: {step['validation']}"
        if step.get("note"):
            line += f" — note: {step['note']}"
        lines.append(line)
    return "\n".join(lines)


class TodoTool(Tool):
    name: ClassVar[str] = "todo"
    description: ClassVar[str] = (
        "Keep a todo list (checklist of steps) for this session; not for notes, reminders or facts. action=set with 'steps' (list of short step "
        "titles, one action "
        "each) replaces the list, all pending. action=update with 'step' (1-based number) and 'status' "
        "(pending, in_progress, done, failed) records progress; when marking done, put the evidence in "
        "'validation' (what output or check proves it); add a 'note' to explain a failure. action=read shows "
        "the list. Update the list as you work so progress stays visible."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["set", "update", "read"], "description": "What to do."},
            # The limit stated in the schema: a grammar ends the list there (the 0.5B wrote "step 1", "step 2", …
            # until its context was full, twice; round 21), and validation names it before the call runs.
            "steps": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_STEPS,
                      "description": "For set: step titles in order."},
            "step": {"type": "integer", "minimum": 1, "description": "For update: the step number (1-based)."},
            "status": {"type": "string", "enum": list(STATUSES), "description": "For update: the new status."},
            "validation": {"type": "string", "description": "For update to done: the evidence the step is done."},
            "note": {"type": "string", "description": "For update: a short note (e.g. why it failed)."},
        },
        "required": ["action"],
        "allOf": [
            {"if": {"properties": {"action": {"const": "set"}}}, "then": {"required": ["steps"]}},
            {"if": {"properties": {"action": {"const": "update"}}},
             "then": {"required": ["step", "status"], "properties": {"validation": {}, "note": {}}}},
        ],
    }
    timeout: ClassVar[float] = 10.0

    def records(self, params: dict[str, Any]) -> bool:
        """A plan's steps are words: a step naming a file has not read it (``Tool.records``)."""
        return True

    def doubt(self, params: dict[str, Any], request: str) -> Doubt | None:
        """A step that is the user's question itself (``the_question``) is no step of theirs; nor, held loosely,
        is a list none of whose steps takes a word or number of the user's words: the 0.5B set "Create a new
        note. Add some details about the note." for a fact to keep, and an earlier task's words for a helper's
        (round 15); nor, loosely, a step that is the user's whole message (``the_whole_message``: the request
        listed instead of done; round 19). Advisory: a plan of the model's own making ("Plan my week") is set when
        it calls again. Loosely too, a list for a request that says when something is to happen ("in 3 minutes",
        "hourly": ``kept_not_scheduled``)."""
        steps = params.get("steps") if params.get("action") == "set" else None
        if not isinstance(steps, list):
            return None
        titles = [s for s in steps if isinstance(s, str)]
        asked = next((s for s in titles if the_question(s, request)), None)
        if asked:
            return Doubt(reason=QUESTION_STORED.format(what=f"The step {asked!r}"), answer=True)
        whole = next((s for s in titles if the_whole_message(s, request)), None)
        if whole is not None:
            return Doubt(reason=f"the step {whole[:160]!r} is the user's whole message "
                                f"({request[:160]!r}), and nothing in it asks for a list, so the list was not set. "
                                "Do what the message asks; set a list only when the user asks for one.",
                         answer=True, repeated_runs=True)
        if (not content_words(request) or not any(content_words(s) for s in titles)
                or any(takes_a_word(s, request) for s in titles)):
            # nothing to compare (steps "a" and "b"; a request of no word), or a step in the user's words; loosely,
            # not a list where the request says when something is to happen (``kept_not_scheduled``)
            return kept_not_scheduled(request, titles, what="a todo list", done="set", keep="set a list")
        return Doubt(reason=f"the steps {' / '.join(titles)[:160]!r} are nothing the user's words ({request[:160]!r}) "
                            "say, so the list was not set. Set only steps the user asked for; if they asked for "
                            "something else, do that.",
                     answer=True, repeated_runs=True)

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        path = todo_path(require_session())
        action = params["action"]
        if action == "read":
            return ToolResult(success=True, output=render(await locked_update(path, _load)))
        if action == "set":
            steps = _new_steps(params.get("steps") or [])
            await locked_update(path, lambda p: _save(p, steps))
            listed = "\n".join(f"{number}. {step['title']}" for number, step in enumerate(steps, start=1))
            return ToolResult(success=True, output=render(steps), metadata={SUMMARY: f"Your todo list:\n{listed}"})
        check_validation = bool(profile_attr("step_validation_enabled", False))
        steps = await locked_update(path, lambda p: _update(p, params, check_validation))
        return ToolResult(success=True, output=render(steps))


def _update(path: Path, params: dict[str, Any], check_validation: bool) -> list[dict[str, Any]]:
    steps = _load(path)
    if not steps:
        raise ToolError("there is no todo list yet; create one with action=set")
    number, status = params.get("step"), params.get("status")
    if number is None or status is None:
        raise ToolError("update needs 'step' (1-based number) and 'status'")
    if not 1 <= number <= len(steps):
        raise ToolError(f"step {number} does not exist; the list has steps 1 to {len(steps)}")
    validation = (params.get("validation") or "").strip()
    if status == "done" and check_validation and not validation:
        raise ToolError(
            f"step validation is on: to mark step {number} done, pass 'validation' with the evidence that "
            "it is done (a command output, a file you read back, a status code). If you have no evidence yet, "
            "check first."
        )
    step = steps[number - 1]
    step["status"] = status
    if validation:
        step["validation"] = validation[:1000]
    if params.get("note"):
        step["note"] = str(params["note"]).strip()[:1000]
    _save(path, steps)
    return steps
