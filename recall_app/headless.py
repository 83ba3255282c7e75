"""THE SEAM between recall firing and the agent: the only place firing touches a run.

``firing.py`` claims an occurrence, then awaits ``run_headless``; everything the
documents list as steps 4-7 of ``_fire_recall`` (block user messages, register the
run for replay, send ``stream_start``, ``agent.run_stream(is_recall=True)``) belongs
to the run registry, ``sessions_app.runs``, which provides::

    def is_busy(session_id: str) -> bool                      # (an async def is accepted too)
    async def run_recall_turn(session_id: str, *, user_id: int, content: str,
                              is_recall: bool = True, rules: RunRules | None = None) -> str

The run follows the recall's own rules (``run_rules_for``: tool allowlist, limits, deny or park a
call that needs approval; the policy point in ``agent.gate`` applies them).

``run_recall_turn`` returns only when the run has ended, with "success",
"max_iterations", "stopped", "time_limit", "error: <message>" or "busy" (a user turn started
first: the recall is deferred). It may raise; that counts as an error. In embedded
mode it is awaited on the server's event loop (see ``_on_server_loop``).
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, get_args

import structlog
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings

from agent.gate import RunRules
from recall_app.models import Recall
from sessions_app.models import Session

log = structlog.get_logger(__name__)

RunOutcome = Literal["success", "max_iterations", "stopped", "time_limit", "error", "busy"]
_OUTCOMES = frozenset(get_args(RunOutcome))


def _runs() -> Any | None:
    try:
        return importlib.import_module("sessions_app.runs")
    except ModuleNotFoundError as exc:
        if exc.name != "sessions_app.runs":
            raise
        return None


def has_run_registry() -> bool:
    """Whether ``sessions_app.runs`` provides ``run_recall_turn`` (tests skip real runs without it)."""
    runs = _runs()
    return runs is not None and callable(getattr(runs, "run_recall_turn", None))


def session_is_busy(session_id: str) -> bool:
    """Step 1: a user turn (or another run) is active in the session. No run registry: not busy."""
    runs = _runs()
    fn = getattr(runs, "is_busy", None) if runs is not None else None
    if fn is None:
        return False
    if inspect.iscoroutinefunction(fn):
        return bool(async_to_sync(fn)(session_id))
    return bool(fn(session_id))


def server_stopping() -> bool:
    """Embedded mode: the server this worker thread belongs to is shutting down. A run started now
    would be cut off by the exit (and end ``interrupted``); the recall stays pending instead."""
    from navi_site.embedded import shutting_down

    return shutting_down()


def build_instruction(recall: Recall) -> str:
    """The recall turn's user message (``is_recall=True``): the agent's instruction to itself."""
    lines = [f"[Scheduled recall · {recall.call_type} · due {recall.trigger_at.isoformat()}]"]
    if recall.internal_comment:
        lines.append(f"Note: {recall.internal_comment}")
    lines += [
        "Your instruction to yourself, written when you scheduled this recall:",
        recall.additional_context_message,
        "Do it now with your tools. The user is not watching live and cannot answer questions; "
        "finish with a short report of what you did and found.",
    ]
    return "\n".join(lines)


def default_allowlist(profile_id: str) -> frozenset[str]:
    """The profile's tools (its subagents' too) minus those whose calls always need approval."""
    from approvals_app.policy import ask_tools
    from approvals_app.selectors import rules
    from profiles_app.models import AgentProfile
    from tools_app.registry import get_registry

    profile = AgentProfile.objects.filter(pk=profile_id).first()
    if profile is None:
        return frozenset()
    names = get_registry().tools_for_profile([*profile.enabled_tools, *profile.subagent_tools])
    return frozenset(names) - ask_tools(names, rules(), profile_id=profile_id)


def run_rules_for(recall: Recall, session: Session) -> RunRules:
    """The recall's own rules for its unattended run (blocking: reads the profile and the rules)."""
    tools = frozenset(recall.allowed_tools) if recall.allowed_tools else default_allowlist(session.profile_id)
    seconds = recall.max_seconds or int(getattr(settings, "RECALL_MAX_SECONDS", 900))
    return RunRules(unattended=True, tools=tools, max_iterations=recall.max_iterations, max_seconds=float(seconds),
                    on_approval="park" if recall.on_approval == "park" else "deny",
                    label=f"the {recall.call_type} recall {str(recall.id)[:8]}")


class HeadlessRunError(Exception):
    """The run ended with an error ("error: <message>" from the run registry)."""


async def _on_server_loop(coro: Any) -> Any:
    """Await ``coro`` on the embedded server's event loop when there is one and it is not ours:
    the in-memory channel layer and the run registry live there (DESIGN.md §2)."""
    from sessions_app.bus import server_loop

    target = server_loop()
    if target is not None and target.is_running() and target is not asyncio.get_running_loop():
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, target))
    return await coro


async def run_headless(*, session: Session, recall: Recall, instruction: str,
                       on_end: Callable[[Any], Awaitable[None]] | None = None) -> RunOutcome:
    """Run one headless recall turn in ``session`` and return how it ended. ``on_end(result)`` (the
    registry's TurnResult) is awaited when the turn ended, before the run's final ``session_sync``.

    Raises HeadlessRunError when the run ended with an error, and NotImplementedError while
    the run registry (``sessions_app.runs.run_recall_turn``) does not exist; firing records
    both as an error outcome.
    """
    runs = _runs()
    turn = getattr(runs, "run_recall_turn", None) if runs is not None else None
    if turn is None:
        raise NotImplementedError(
            "Headless recall runs need sessions_app.runs.run_recall_turn (the run registry), which is not "
            "installed yet."
        )
    rules = await sync_to_async(run_rules_for, thread_sensitive=False)(recall, session)
    outcome = await _on_server_loop(
        turn(str(session.id), user_id=session.owner_id, content=instruction, is_recall=True, on_end=on_end,
             rules=rules))
    text = str(outcome or "")
    if text == "error" or text.startswith("error:"):
        raise HeadlessRunError(text.partition(":")[2].strip() or "the recall run failed")
    if text not in _OUTCOMES:
        log.warning("recall_unknown_run_outcome", session_id=str(session.id), outcome=text)
        raise HeadlessRunError(f"the run ended with an unknown outcome {text!r}")
    return text  # type: ignore[return-value]
