"""The one policy point every tool call passes before it runs (issue 20; DESIGN "Direction").

The core keeps two things per turn, in a ``TurnGuard``:

* the turn's **taint**: what untrusted content it took in (a tool result whose metadata has
  ``untrusted_source``: web pages, search results, HTTP bodies, uploaded files, MCP results; or a
  turn begun by an incoming message). A subagent starts with its parent's taint, and what it
  reads taints its parent too (its answer lands in the parent's context);
* the run's **rules** (``RunRules``): None for a live turn; a recall's own rules for an unattended
  run (tool allowlist, limits, deny or park when a call needs approval).

Before a call runs, ``pass_gate`` asks the approvals port (``agent.ports.approvals()``, plugged in
by ``approvals_app``) with a ``CallCheck``. The port yields ``ApprovalRequired`` /
``ApprovalResolved`` events while the user decides, then exactly one ``Passage``: run the call, or
the refusal the model sees instead. No port plugged in: every call runs (the core's own tests).

The decision point sits between the model's streamed step and the tool run, so the model's
connection is already closed while a call waits. A subagent's time limit does not run while one
of its calls waits for the user.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from agent import ctx, ports
from agent.events import AgentEvent, ApprovalRequired, ApprovalResolved

OnApproval = Literal["deny", "park"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRules:
    """What an unattended run may do: a recall's own rules (None: a live turn, a person is there).

    ``tools``: the allowlist (None: the profile's tools); ``max_iterations`` caps the profile's;
    ``max_seconds`` is working time (the run registry stops the run; parked time is not counted);
    ``on_approval``: a call that needs approval is denied, or the run parks until the user decides.
    """

    unattended: bool = True
    tools: frozenset[str] | None = None
    max_iterations: int | None = None
    max_seconds: float | None = None
    on_approval: OnApproval = "deny"
    label: str = "a scheduled recall"


class Taint:
    """The untrusted content a turn (or subagent) took in: labels in order, and the hosts it fetched."""

    __slots__ = ("_labels", "hosts", "parent")

    def __init__(self, labels: tuple[str, ...] = (), *, parent: Taint | None = None) -> None:
        self._labels: dict[str, None] = {}
        self.hosts: set[str] = set()
        self.parent = parent
        if parent is not None:
            self._labels.update(parent._labels)
            self.hosts.update(parent.hosts)
        for label in labels:
            self.add(label)

    def add(self, source: str) -> None:
        """Record one source: a URL counts by its host (and that host counts as fetched)."""
        source = str(source).strip()
        if not source:
            return
        host = host_of(source)
        self._labels[host or source] = None
        if host:
            self.hosts.add(host)
        if self.parent is not None:
            self.parent.add(source)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self._labels)

    def __bool__(self) -> bool:
        return bool(self._labels)

    def child(self) -> Taint:
        return Taint(parent=self)


def host_of(source: str) -> str:
    """The host (with a non-default port) of an http(s) URL, else ""."""
    if not source.startswith(("http://", "https://")):
        return ""
    try:
        parts = urlsplit(source)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return ""
    if host and port and port not in (80, 443):
        return f"{host}:{port}"
    return host


@dataclass(eq=False)
class TurnGuard:
    """A turn's taint and rules; a subagent gets ``child()`` of its parent's."""

    taint: Taint = field(default_factory=Taint)
    rules: RunRules | None = None
    run_id: str = ""
    # A subagent's time limit (run_ephemeral's asyncio.timeout): paused while a call waits.
    deadline: asyncio.Timeout | None = None

    def child(self) -> TurnGuard:
        return TurnGuard(taint=self.taint.child(), rules=self.rules, run_id=self.run_id)

    def observe(self, metadata: dict[str, Any]) -> None:
        """Taint the turn with what a tool result brought in (``metadata["untrusted_source"]``)."""
        source = metadata.get("untrusted_source")
        if source:
            self.taint.add(str(source))

    def allows_tool(self, name: str) -> bool:
        return self.rules is None or self.rules.tools is None or name in self.rules.tools


@dataclass(frozen=True, slots=True, kw_only=True)
class CallCheck:
    """What the approvals port decides about: one call, who makes it, and why it might be risky now."""

    tool: str
    args: dict[str, Any]
    session_id: str
    run_id: str
    user_id: int | None
    user_role: str | None
    profile_id: str
    is_subagent: bool
    tainted_by: tuple[str, ...]
    fetched_hosts: frozenset[str]
    rules: RunRules | None


Recorder = Callable[[bool, str], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Passage:
    """The gate's answer: run the call (``run``) or not (``refusal`` is what the model reads).
    ``record(success, result_text)`` is awaited after the call ran (the audit log)."""

    run: bool
    refusal: str | None = None
    record: Recorder | None = None

    async def done(self, success: bool, text: str) -> None:
        if self.record is not None:
            await self.record(success, text)


OPEN = Passage(run=True)


def check_for(guard: TurnGuard, *, tool: str, args: dict[str, Any], session_id: str, profile_id: str,
              is_subagent: bool) -> CallCheck:
    return CallCheck(
        tool=tool, args=args, session_id=session_id, run_id=guard.run_id, user_id=ctx.current_user_id.get(),
        user_role=ctx.current_user_role.get(), profile_id=profile_id, is_subagent=is_subagent,
        tainted_by=guard.taint.labels, fetched_hosts=frozenset(guard.taint.hosts), rules=guard.rules,
    )


async def pass_gate(guard: TurnGuard, check: CallCheck, *, stop_event: asyncio.Event
                    ) -> AsyncIterator[AgentEvent | Passage]:
    """The approvals port's events for this call, then one Passage (OPEN without a port)."""
    desk = ports.approvals()
    if desk is None:
        yield OPEN
        return
    paused: tuple[float, float | None] | None = None  # (when the wait began, the deadline then)
    got: Passage | None = None
    try:
        async for item in desk.guard(check, stop_event=stop_event):
            if isinstance(item, Passage):
                got = item
                continue
            if isinstance(item, ApprovalRequired) and guard.deadline is not None and paused is None:
                paused = (asyncio.get_running_loop().time(), guard.deadline.when())
                guard.deadline.reschedule(None)
            elif isinstance(item, ApprovalResolved) and paused is not None:
                _resume(guard, paused)
                paused = None
            yield item
    finally:
        if paused is not None:
            _resume(guard, paused)
    yield got if got is not None else Passage(run=False, refusal="Error: the approval check gave no answer; "
                                                                 "the call was not run.")


def _resume(guard: TurnGuard, paused: tuple[float, float | None]) -> None:
    began, when = paused
    if guard.deadline is not None and when is not None:
        guard.deadline.reschedule(when + (asyncio.get_running_loop().time() - began))
