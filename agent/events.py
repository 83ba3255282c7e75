"""One frozen dataclass per documented event (spec 002 "Events Reference", spec 004).

``to_dict()`` is the exact wire JSON. The transport adds a ``seq`` number when it
fans an event out; the dataclasses themselves know nothing about transport.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

_SCALARS = (str, int, float, bool, type(None))


class _Event:
    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        # Most events (every stream_delta) hold only strings and numbers: build the dict directly.
        # asdict() walks and deep-copies every value — a measurable share of the server's CPU
        # at thousands of deltas a second; it stays the path for events with dicts or lists.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}  # type: ignore[attr-defined]
        for value in data.values():
            if type(value) not in _SCALARS:
                return asdict(self)  # type: ignore[call-overload]
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStart(_Event):
    """Agent processing began; the client blocks input."""

    type: Literal["stream_start"] = "stream_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDelta(_Event):
    delta: str
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingEnd(_Event):
    type: Literal["thinking_end"] = "thinking_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnThinking(_Event):
    """The whole reasoning block of a tool-calling turn."""

    thinking: str
    is_subagent: bool = False
    type: Literal["turn_thinking"] = "turn_thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanReady(_Event):
    plan: str
    type: Literal["plan_ready"] = "plan_ready"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(_Event):
    tool: str
    args: dict[str, Any]
    is_subagent: bool = False
    type: Literal["tool_started"] = "tool_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall(_Event):
    """A tool finished; pairs with the preceding ToolStarted."""

    tool: str
    args: dict[str, Any]
    result: str
    success: bool
    is_subagent: bool = False
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDelta(_Event):
    delta: str
    type: Literal["stream_delta"] = "stream_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnd(_Event):
    content: str
    context_tokens: int = 0
    max_context_tokens: int = 0
    # Internal: "stop" or "max_iterations" (a recall counts both as success); not on the wire.
    finish_reason: str = "stop"
    type: Literal["stream_end"] = "stream_end"

    def to_dict(self) -> dict[str, Any]:
        data = _Event.to_dict(self)
        data.pop("finish_reason")
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStopped(_Event):
    type: Literal["stream_stopped"] = "stream_stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompressed(_Event):
    messages_before: int
    messages_after: int
    summary: str = ""
    context_tokens: int = 0
    max_context_tokens: int = 0
    type: Literal["context_compressed"] = "context_compressed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileSwitched(_Event):
    profile_id: str
    profile_name: str
    type: Literal["profile_switched"] = "profile_switched"


@dataclass(frozen=True, slots=True, kw_only=True)
class Error(_Event):
    message: str
    type: Literal["error"] = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequired(_Event):
    """A tool call waits for the user's decision (issue 20); the turn pauses until it comes.

    ``tainted_by``: the untrusted content this turn took in that made the call need approval
    ("example.com"); empty when the policy alone asks. ``expires_at`` is ISO 8601 (UTC)."""

    approval_id: str
    tool: str
    args: dict[str, Any]
    reason: str
    touches: str = ""
    tainted_by: list[str] = field(default_factory=list)
    expires_at: str = ""
    is_subagent: bool = False
    type: Literal["approval_required"] = "approval_required"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalResolved(_Event):
    """How an approval ended: ``decision`` is approved, denied, expired or cancelled (Stop);
    ``scope`` "once" or "session"; ``decided_by`` the user's name (empty: nobody decided)."""

    approval_id: str
    decision: str
    scope: str = "once"
    decided_by: str = ""
    reason: str = ""
    is_subagent: bool = False
    type: Literal["approval_resolved"] = "approval_resolved"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallUpdate(_Event):
    session_id: str
    recall_id: str | None = None
    call_type: str | None = None
    trigger_at: str | None = None
    status: str | None = None
    action: str | None = None
    type: Literal["recall_update"] = "recall_update"


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillProposalUpdate(_Event):
    """A skill proposal of this session appeared (after its turn ended well) or was decided.

    ``action``: "proposed", "accepted" or "discarded"; ``proposal`` is the proposal as the REST API
    returns it (id, name, description, content, status, updates, version, ...)."""

    session_id: str
    proposal: dict[str, Any]
    action: str
    type: Literal["skill_proposal"] = "skill_proposal"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerQueued(_Event):
    """A message sent while a turn runs waits for the turn's next step (every tab shows it pending)."""

    id: str
    content: str
    ref: str | None = None  # the sending client's own reference, echoed
    type: Literal["steer_queued"] = "steer_queued"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerWithdrawn(_Event):
    """A queued message was taken back before the turn read it."""

    id: str
    type: Literal["steer_withdrawn"] = "steer_withdrawn"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerAccepted(_Event):
    """The loop read a queued message at a step boundary: it is now a user message of the history."""

    id: str
    content: str
    type: Literal["steer_accepted"] = "steer_accepted"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerDropped(_Event):
    """The turn ended (stopped, failed, or finished before its next step) with messages still queued:
    ``items`` [{id, content}] were not used; the client gives their text back to the user."""

    items: list[dict[str, str]]
    reason: Literal["stopped", "error", "ended"]
    type: Literal["steer_dropped"] = "steer_dropped"


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(_Event):
    type: Literal["heartbeat"] = "heartbeat"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSync(_Event):
    type: Literal["session_sync"] = "session_sync"


AgentEvent = (
    StreamStart
    | ThinkingDelta
    | ThinkingEnd
    | TurnThinking
    | PlanReady
    | ToolStarted
    | ToolCall
    | StreamDelta
    | StreamEnd
    | StreamStopped
    | ContextCompressed
    | ProfileSwitched
    | Error
    | ApprovalRequired
    | ApprovalResolved
    | RecallUpdate
    | SkillProposalUpdate
    | SteerQueued
    | SteerWithdrawn
    | SteerAccepted
    | SteerDropped
    | Heartbeat
    | SessionSync
)

def _wire_type(cls: type[Any]) -> str:
    """The default of an event class's ``type`` field: its name on the wire."""
    default = cls.__dataclass_fields__["type"].default
    if not isinstance(default, str):
        raise TypeError(f"{cls.__name__}.type has no string default")
    return default


EVENT_TYPES: dict[str, type[Any]] = {
    _wire_type(cls): cls
    for cls in (
        StreamStart, ThinkingDelta, ThinkingEnd, TurnThinking, PlanReady, ToolStarted,
        ToolCall, StreamDelta, StreamEnd, StreamStopped, ContextCompressed,
        ProfileSwitched, Error, ApprovalRequired, ApprovalResolved, RecallUpdate, SkillProposalUpdate, Heartbeat,
        SessionSync, SteerQueued, SteerWithdrawn, SteerAccepted, SteerDropped,
    )
}


def event_from_dict(data: dict[str, Any]) -> AgentEvent:
    """Inverse of ``to_dict()`` (tests round-trip every event through JSON)."""
    cls = EVENT_TYPES[data["type"]]
    return cls(**{k: v for k, v in data.items() if k != "type"})  # type: ignore[no-any-return]


def mark_subagent(event: AgentEvent) -> AgentEvent:
    """The same event with is_subagent=True where the event has that field."""
    if isinstance(event, (ToolStarted, ToolCall, TurnThinking, ApprovalRequired, ApprovalResolved)):
        from dataclasses import replace

        return replace(event, is_subagent=True)
    return event


