"""``reflect``: a structured self-review built from the todo list (no LLM call; a thinking aid)."""
from __future__ import annotations

from typing import Any, ClassVar

from agent.ctx import current_session_id
from tools_app.base import Tool, ToolResult
from tools_app.builtins_meta.todo import read_todo, render


def _titles(steps: list[dict[str, Any]], *statuses: str) -> list[str]:
    return [f"{i}. {s['title']}" for i, s in enumerate(steps, start=1) if s.get("status", "pending") in statuses]


def _bullets(items: list[str], empty: str) -> str:
    return "\n".join(f"   - {item}" for item in items) if items else f"   - {empty}"


def build_reflection(progress: str, goal: str | None, steps: list[dict[str, Any]]) -> str:
    """The review prompt: goal, reported progress, todo state, and the questions to answer."""
    done = _titles(steps, "done")
    left = _titles(steps, "pending", "in_progress")
    failed = _titles(steps, "failed")
    unproven = [f"{i}. {s['title']}" for i, s in enumerate(steps, start=1)
                if s.get("status") == "done" and not s.get("validation")]
    todo = render(steps) if steps else "No todo list yet. If the task has several steps, create one (todo action=set)."
    goal_line = goal.strip() if goal and goal.strip() else "(not given: restate the user's request in one sentence)"
    return "\n".join([
        "## Reflection",
        f"Goal: {goal_line}",
        f"Progress you reported: {progress.strip()}",
        "",
        todo,
        "",
        "Answer these to yourself before the next action:",
        "1. Done: what is finished, and what evidence proves each item?",
        _bullets(done, "nothing marked done yet"),
        "2. Left: what remains, in order?",
        _bullets(left, "no open steps"),
        "3. Failed: why did these fail; retry differently, re-plan, or report to the user?",
        _bullets(failed, "no failed steps"),
        "4. Evidence gaps: which results have you assumed rather than checked?",
        _bullets(unproven, "every done step has evidence"),
        "5. Next: the single most useful next action, and the tool it needs.",
        "6. Is the goal already met? If so, stop calling tools and answer the user.",
    ])


class ReflectTool(Tool):
    name: ClassVar[str] = "reflect"
    description: ClassVar[str] = (
        "Step back and review your work. Give 'progress' (what you have done so far) and optionally 'goal' "
        "(the user's goal in one sentence). Returns a checklist built from your todo list: what is done and "
        "proven, what is left, what failed, and what to do next. Use it when stuck, after a failure, or "
        "before giving the final answer on a long task."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "progress": {"type": "string", "description": "What you have done so far and what you found."},
            "goal": {"type": "string", "description": "The user's goal, in one sentence."},
        },
        "required": ["progress"],
    }
    timeout: ClassVar[float] = 10.0

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        session_id = current_session_id.get()
        steps = read_todo(session_id) if session_id else []
        return ToolResult(success=True, output=build_reflection(params["progress"], params.get("goal"), steps))
