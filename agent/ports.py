"""The ports of the agent core: what it needs from the apps, as small protocols.

The core (`agent/`) imports no app. Each app implements the port it owns and plugs it in from
its ``AppConfig.ready()``:

| port            | implemented by                                   |
|-----------------|--------------------------------------------------|
| SessionStore    | ``sessions_app.store.DjangoSessionStore``        |
| ToolProvider    | ``tools_app.provider.RegistryToolProvider``      |
| TodoBoard       | ``tools_app.provider.FileTodoBoard``             |
| ProfileSource   | ``profiles_app.source.DjangoProfileSource``      |
| MemoryProvider  | ``memory_app.provider.DjangoMemoryProvider``     |
| SkillCatalog    | ``skills_app.catalog.StoreSkillCatalog``         |
| ApprovalDesk    | ``approvals_app.desk.PolicyDesk``                |
| Steering        | ``sessions_app.runs.steering_port.RegistrySteering`` |

Tests of the core plug in the scripted doubles of ``agent.testing`` instead. A port that is
asked for before anything was plugged in raises ``PortMissing`` naming the app that provides
it; the memory, skills, approvals and steering ports are optional (no memory app: no memory in the
prompt; no skills app: no skills block; no approvals app: every tool call runs, as before the policy
point existed; no steering: nothing is injected into a running turn).
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agent.store import SessionStore

if TYPE_CHECKING:
    from agent.events import AgentEvent
    from agent.gate import CallCheck, Passage
    from agent.profiles import ProfileSpec


class ToolOutput(Protocol):
    """What a tool run returns to the loop (``tools_app.base.ToolResult`` has this shape)."""

    success: bool
    metadata: dict[str, Any]

    def for_model(self) -> str: ...


# A key of a tool result's metadata (``ToolSet.looks``): the call only looked, whether it succeeded or
# not. A small model is not ordered to answer after its first look, and a file it looked at is not
# counted as read: the 1.5B answered "who wrote report.txt?" with the file's date.
LOOKUP = "lookup"
# A key of a tool result's metadata: the output is words a model wrote for the user (a helper's answer),
# which an answer may pass on as they are; any other output is the tool's own, and an answer that opens
# with it copied is a raw dump (``agent.aids``).
WORDS = "words"
# A key of a tool result's metadata: what the call did, in a line or two of plain words for the user ("Wrote
# shopping.txt (3 lines)."), where the output is written for the model (paths, sizes, ids). It is what the
# user reads when a small model gives no usable answer after the call (``agent.aids.summary_of``).
SUMMARY = "summary"
# A key of a tool result's metadata (``ToolSet.records``): the call only kept or found words (a note, a step
# of a plan, a reminder, a fact), so a file its words name was not opened: the 0.5B set a todo step "dig the
# magic number out of facts.txt" and answered "The magic number is 42." (round 24).
RECORDS = "records"


@dataclass(frozen=True, slots=True, kw_only=True)
class Doubt:
    """Why a call does not do what the user's words ask, found before it runs (``ToolSet.doubt``).

    ``answer``: the call rests on a guess (a file nobody named that is not there): it is not run and the
    model is told what is there instead. Otherwise an argument contradicts the user's words (a reminder
    "in 3 minutes" set for an hour from now): with ``fix`` (the arguments the user's words determine,
    exactly as said) the call runs with those; without, it is written again, told ``reason``.
    ``repeated_runs``: an ``answer`` doubt the tool holds loosely (its words may miss how the user put it):
    told once, a model that makes a call of the same tool again has it run.
    ``again``: of an ``answer`` doubt, whether another call of the tool could serve the request; False when the
    tool has nothing for it (a guessed look in a folder that holds nothing): the model's next call of it is
    not made, and it chooses among the other tools, or none (``agent.loop``)."""

    reason: str
    answer: bool = False
    fix: dict[str, Any] | None = None
    repeated_runs: bool = False
    again: bool = True
    needs: str = ""  # a tool the doubt's advice names: where the turn cannot call it, the doubt is not made


class ToolSet(Protocol):
    """The tools of one turn: names, schemas for the model, and execution."""

    def names(self) -> list[str]: ...

    def tools_for_profile(self, enabled_tools: Iterable[str]) -> list[str]:
        """The registered tools among a profile's enabled ones (patterns expanded), in order."""
        ...

    def can_use(self, name: str) -> bool:
        """Whether the current user (``agent.ctx``) may use the tool at all."""
        ...

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]: ...

    async def execute(self, name: str, args: Any, *, allowed: set[str] | None = None) -> ToolOutput:
        """Run one call. Tool errors come back as an unsuccessful result, never as an exception."""
        ...

    def doubt(self, name: str, args: dict[str, Any], request: str) -> Doubt | None:
        """Why the call ``name(args)`` does not do what ``request`` (the user's words) asks, judged by the
        tool itself before it runs (None: nothing to say)."""
        ...

    def looks(self, name: str, args: dict[str, Any]) -> bool:
        """The call only looks: it says where things are or that they exist (a listing, a file's size and
        date), not what they say (recorded as ``LOOKUP`` in its result's metadata)."""
        ...

    def changes(self, name: str, args: dict[str, Any]) -> bool:
        """The call may change something (a file, a store, a schedule): True unless its tool knows it only reads."""
        ...

    def named(self, request: str, among: Iterable[str]) -> list[tuple[str, str]]:
        """The tools of ``among`` that ``request`` (the user's words) names ("a subagent"), each with the words of
        the request that name it."""
        ...

    def framing(self) -> tuple[str, ...]:
        """The tools' own words that they put around the user's in arguments meant for a model (a recall's
        instruction): no answer shows them."""
        ...

    def records(self, name: str, args: dict[str, Any]) -> bool:
        """The call only keeps or finds words (a note, a plan's step, a reminder): a file its words name is not
        opened by it (recorded as ``RECORDS`` in its result's metadata). False unless its tool knows."""
        ...


class ToolProvider(Protocol):
    async def for_turn(self) -> ToolSet:
        """The tool set for a turn that starts now (fresh admin switches, MCP tools discovered)."""
        ...

    def on_reload(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever the set of tools changes (the prompt cache depends on it)."""
        ...


class TodoBoard(Protocol):
    """The session's todo list, which the planner fills and the loop advances."""

    def read(self, session_id: str) -> list[dict[str, Any]]: ...

    def replace(self, session_id: str, steps: list[str]) -> None: ...

    def restore(self, session_id: str, steps: list[dict[str, Any]]) -> None:
        """Write steps as they were (title, status, validation, note): an imported conversation's plan."""
        ...

    def complete_next(self, session_id: str, note: str) -> None: ...


class ProfileSource(Protocol):
    def load(self, profile_id: str) -> ProfileSpec:
        """The active or inactive profile with this id. Raises ``agent.profiles.ProfileNotFound``."""
        ...

    def active_ids(self) -> list[str]: ...


class MemoryProvider(Protocol):
    async def summary_for(self, user_id: int) -> str | None:
        """The narrative summary of what Navi remembers about the user, or None."""
        ...


class SkillCatalog(Protocol):
    def prompt_block(self, profile: ProfileSpec, tools: Sequence[str]) -> str:
        """The system prompt's block naming the profile's enabled skills ('' for none).

        ``tools`` are the tools the turn may use (the block only mentions skill_view/skill_write when
        they are among them). Called on every model call: it must not touch the database or block,
        and must return the same bytes while nothing changed (it is part of the cached prompt prefix).
        """
        ...


class ApprovalDesk(Protocol):
    def guard(self, check: CallCheck, *, stop_event: asyncio.Event) -> AsyncIterator[AgentEvent | Passage]:
        """Decide one tool call (``agent.gate``): yield ApprovalRequired / ApprovalResolved while the
        user decides (ending the wait when ``stop_event`` is set), then exactly one Passage."""
        ...


class Workspace(Protocol):
    def named_files(self, session_id: str, text: str) -> list[tuple[str, int]]:
        """The files of the session's working directory that ``text`` names (``report.txt``), with
        their sizes in bytes: at most a few, nothing hidden. Quick (one directory listing)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerNote:
    """A message the user sent while the turn ran, to be read at the turn's next step."""

    id: str
    content: str


class Steering(Protocol):
    async def take(self, session_id: str, run_id: str) -> list[SteerNote]:
        """The messages queued for this run, oldest first, removed from the queue (each is taken once).

        Called by the loop at every step boundary of a live turn: it must be quick (one round trip)."""
        ...


class PortMissing(RuntimeError):
    pass


@dataclass(slots=True)
class _Ports:
    session_store: SessionStore | None = None
    tools: ToolProvider | None = None
    todo: TodoBoard | None = None
    profiles: ProfileSource | None = None
    memory: MemoryProvider | None = None
    skills: SkillCatalog | None = None
    approvals: ApprovalDesk | None = None
    steering: Steering | None = None
    workspace: Workspace | None = None


_ports = _Ports()
_PROVIDED_BY = {"session_store": "sessions_app", "tools": "tools_app", "todo": "tools_app",
                "profiles": "profiles_app", "memory": "memory_app", "skills": "skills_app",
                "approvals": "approvals_app", "steering": "sessions_app",
                "workspace": "tools_app"}


def provide(**implementations: Any) -> None:
    """Plug in implementations by port name (``provide(tools=..., todo=...)``); None unplugs."""
    for name, impl in implementations.items():
        if name not in _PROVIDED_BY:
            raise TypeError(f"unknown port {name!r}; ports: {', '.join(_PROVIDED_BY)}")
        setattr(_ports, name, impl)


def _get(name: str) -> Any:
    impl = getattr(_ports, name)
    if impl is None:
        raise PortMissing(f"the agent's {name} port has no implementation: is {_PROVIDED_BY[name]} in INSTALLED_APPS?")
    return impl


def session_store() -> SessionStore:
    return _get("session_store")  # type: ignore[no-any-return]


def tools() -> ToolProvider:
    return _get("tools")  # type: ignore[no-any-return]


def todo() -> TodoBoard:
    return _get("todo")  # type: ignore[no-any-return]


def profiles() -> ProfileSource:
    return _get("profiles")  # type: ignore[no-any-return]


def memory() -> MemoryProvider | None:
    return _ports.memory


def skills() -> SkillCatalog | None:
    return _ports.skills


def approvals() -> ApprovalDesk | None:
    return _ports.approvals


def steering() -> Steering | None:
    return _ports.steering


def workspace() -> Workspace | None:
    return _ports.workspace


def snapshot() -> dict[str, Any]:
    """The current implementations (tests swap a port and put the old one back)."""
    return {name: getattr(_ports, name) for name in _PROVIDED_BY}
