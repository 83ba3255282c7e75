"""The tool protocol (spec 002 "Tool Format").

Class-based tools subclass ``Tool`` and return a ``ToolResult``. Module-level
user tools (``name``, ``description``, ``parameters``, ``async execute(params) -> str``)
are wrapped into a ``Tool`` by the loader. Tools find "their" session, user and
profile through the context vars in ``agent.ctx``.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from agent.aids import FUNCTION_WORDS, SHORT_FUNCTION_WORDS
from agent.ports import Doubt
from recall_app.timeparse import said_times  # the recall's own time grammar (a module of no model and no app import)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool returns. ``output`` is always a string: the model sees it."""

    success: bool
    output: str = ""
    error: str | None = None
    # Internal hints, e.g. {"is_image": True, "base64": "...", "mime": "image/png"}.
    metadata: dict[str, Any] = field(default_factory=dict)

    def for_model(self) -> str:
        """The text the model receives as the tool result."""
        if self.success:
            return self.output
        if self.output:
            return f"Error: {self.error}\n{self.output}"
        return f"Error: {self.error}"


class ToolError(Exception):
    """Raised inside a tool: becomes a failed ToolResult the model sees, never a crash."""


ToolSource = Literal["builtin", "user", "mcp"]


class Tool(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    source: ClassVar[ToolSource] = "builtin"
    # Seconds before the registry gives up on the tool (the tool result says so).
    timeout: ClassVar[float] = 60.0
    # Characters of output the model gets; the rest is cut with a note.
    max_output_chars: ClassVar[int] = 20_000
    # Staff-only by default (DESIGN.md §6); profiles may change this in the admin.
    dangerous: ClassVar[bool] = False
    # Output comes from the outside world (web pages, HTTP bodies, files) and is
    # marked as untrusted data for the model.
    untrusted_output: ClassVar[bool] = False
    # What people call this tool when they ask for it by name ("a subagent"): lower-case phrases of whole words,
    # the names its own description gives it, never the wording of requests. A small model that does the job itself
    # with a call that changes nothing, where the user's words name this tool so, is told and made to call it, once
    # a turn (``agent.loop._asked_by_name``).
    named_as: ClassVar[tuple[str, ...]] = ()
    # Words of the tool's own that it puts around the user's in an argument (a recall's instruction: "When due:
    # remind the user of what they asked, "…""), meant for the model that reads the argument later: an answer
    # with seven of them in a row is Navi's wording shown, in any turn (``agent.aids.poor_answer``).
    framing: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    async def execute(self, params: dict[str, Any]) -> ToolResult: ...

    def doubt(self, params: dict[str, Any], request: str) -> Doubt | None:
        """Why this call does not do what ``request`` (the user's words) asks, before it runs: a guess
        (``Doubt(answer=True)``) or an argument the words contradict (None: nothing to say). Only what
        the tool itself knows (its files, its time grammar), never the wording of particular requests."""
        return None

    def looks(self, params: dict[str, Any]) -> bool:
        """This call only looks: where things are or that they exist, not what they say (``agent.ports.LOOKUP``)."""
        return False

    def changes(self, params: dict[str, Any]) -> bool:
        """This call may change something (a file, a store, a schedule, the world outside): True unless the tool
        knows it only reads."""
        return True

    def records(self, params: dict[str, Any]) -> bool:
        """This call only keeps or finds words (a note, a step of a plan, a reminder, a fact): a file its words
        name is not opened by it, so it says nothing of what the file says (``agent.ports.RECORDS``). False
        unless the tool knows: a call of an unknown kind may have read what it names."""
        return False

    def schema(self) -> dict[str, Any]:
        """The JSON-schema tool definition sent to the model."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


_WORDS = re.compile(r"\w+")
QUESTION_STORED = ("{what} is the user's own question, word for word: keeping it does not answer it, so it was "
                   "not stored. Answer the question in words, from what you know or what this conversation says.")


KEPT_NOT_SCHEDULED = ("the user's words ({request!r}) say when ({when!r}), and {what} keeps words without doing "
                      "anything then, so it was not {done}. If they want to be reminded or have something done then, "
                      "schedule a recall for it; {keep} only if that is what they asked for.")
SCHEDULE_RECALL = "schedule_recall"  # the recall app's tool (``recall_app.tools.ScheduleRecallTool`` is named so)
SOON_SECONDS = 12 * 3600  # a time from now, or a repeat, within half a day: what a reminder is for, more than a list


def _said_time(text: str) -> tuple[str, int] | None:
    """The one time from now or repeat ``text`` says, as its words and seconds (``said_when``)."""
    said = said_times(text)
    times = [*said.once, *said.every]
    return (times[0][0].strip(), times[0][1]) if len(times) == 1 and said.plain else None


def _said_soon(request: str) -> tuple[str, int] | None:
    """``_said_time``, within half a day (``SOON_SECONDS``)."""
    said = _said_time(request)
    return said if said and said[1] <= SOON_SECONDS else None


def said_when(request: str) -> str | None:
    """The one time from now or repeat that ``request`` says, within half a day (``SOON_SECONDS``), in its words ("in
    3 minutes", "hourly", "a 3-minute reminder": the recall time grammar, ``recall_app.timeparse.said_times``); None
    when it says none, more than one, a later one, or not plainly. A note, a todo step or a fact does nothing at that
    time, so a small model's call of one for such a request is held loosely unless it keeps the time in its words
    (``kept_not_scheduled``): the 0.5B set the todo steps "stretch legs", "3 minutes" for "Set a 3-minute reminder
    for me to stretch my legs.", and saved the fact "Water is essential for hydration" for an hourly reminder (round
    25). Clock times and days ("at 5 pm", "on Friday") are no time from now, and a time days away is more often a
    list's or a note's deadline ("pack boxes for the move in 2 days") than a reminder: neither is doubted."""
    said = _said_soon(request)
    return said[0] if said else None


def kept_not_scheduled(request: str, kept: Sequence[str], what: str, done: str, keep: str) -> Doubt | None:
    """A loose doubt (the model's call made again runs) about a call that keeps words (``kept``: the note, the steps,
    the fact and its key) for a request that says when something is to happen soon (``said_when``), none of which says
    that time itself ("drink water every hour" as a step of "put drink water every hour on my list" does: the user's
    time is kept with what it is for); None when the request says no such time or nothing is kept. Only where the turn
    can schedule a recall (``Doubt.needs``)."""
    said = _said_soon(request)
    if said is None or not any(content_words(value) for value in kept):
        return None
    if said[1] in {time[1] for time in map(_said_time, kept) if time}:
        return None  # the time is kept with what it is for
    return Doubt(reason=KEPT_NOT_SCHEDULED.format(request=request[:160], when=said[0], what=what, done=done, keep=keep),
                 answer=True, repeated_runs=True, needs=SCHEDULE_RECALL)


def the_question(text: str, request: str) -> bool:
    """``text`` (what a call would keep: a note, a todo step, a fact) is one of the user's questions of this
    turn (``request``, their messages one per line) word for word: in the new session of "What is my server
    called?", the 0.5B set it as a todo step and the 1.5B added it as a note (round 13). A question inside a
    request to keep it ("Add to my notes: why does the boiler click?") is a part of the message, not all of it."""
    said = _WORDS.findall(text.lower())
    return len(said) >= 3 and any(line.strip().endswith("?") and _WORDS.findall(line.lower()) == said
                                  for line in request.splitlines())


_NOT_CONTENT = FUNCTION_WORDS | SHORT_FUNCTION_WORDS


def content_words(text: str) -> set[str]:
    """Numbers, and words of three letters or more that are not function words, lower case."""
    return {w for w in re.findall(r"[^\W_]+", text.lower())
            if w.isdigit() or len(w) >= 3 and w not in _NOT_CONTENT}


def takes_a_word(value: str, request: str) -> bool:
    """A word of ``value`` (what a call would keep: a fact, a todo step) is one of ``request``'s, a number the
    same number, a word the same in its first four letters ("vegetarian", "vegetarians")."""
    said = content_words(request)
    stems = {w[:4] for w in said if not w.isdigit()}
    return any(w in said if w.isdigit() else w[:4] in stems for w in content_words(value))


def _stems(text: str) -> set[str]:
    """``text``'s content words as the doubts compare them: a number whole, a word by its first four letters."""
    return {w if w.isdigit() else w[:4] for w in content_words(text)}


def the_whole_message(value: str, request: str) -> bool:
    """``value`` (what a call would keep: a note, one todo step) takes every word of what the user said in this
    turn (``request``; words as ``takes_a_word`` compares them): the whole request is kept, so no word of it is
    left to ask for the keeping. The 1.5B noted "Hi! Good to have you around." for "Hi hi! Good to have you
    around." in every run of round 19, and the 0.5B listed "Write my shopping list to shopping.txt: milk, eggs,
    bread." as one todo step. A list in the user's lines ("Here's my todo list:\n- buy milk\n- call mom") or a
    plan of several steps ("Read report.txt", "Summarize it") keeps no one value of it all; a note of "Note down:
    call the plumber" in full does, and the loose doubt that follows costs it a confirmation."""
    said = _stems(request)
    return bool(said) and said <= _stems(value)
