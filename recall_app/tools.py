"""``schedule_recall`` and ``manage_recall`` (spec 004): the agent schedules its own future work."""
from __future__ import annotations

import re
from datetime import UTC, timedelta
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.utils import timezone

from agent.aids import FUNCTION_WORDS
from agent.ctx import current_guard, current_session_id, current_user_id
from agent.decide import GRAMMAR_PATTERN
from agent.domains import DOMAIN_KEY, TOOLS
from agent.ports import SUMMARY, Doubt
from navi_site.errors import BadRequest, NaviError
from recall_app import services
from recall_app.models import Recall
from recall_app.timeparse import WHEN_PATTERN, WhenError, describe_delta, parse_when, said_times, says_when
from sessions_app.models import Session
from tools_app.base import SCHEDULE_RECALL, Tool, ToolError, ToolResult

INSTRUCTION_RULES = (
    "additional_context_message is the instruction your future self receives when the recall fires, "
    "headless, with nobody to ask. Write it as a todo item for yourself, not as a chat reminder, and name "
    "the specific tools, files or URLs to use. "
    "BAD: \"Tell the user that 2 hours have passed\". "
    "GOOD: \"Read /tmp/build.log with filesystem. If errors, read last 50 lines and report.\""
)


def _session_for(session_id: str | None) -> Session:
    """The target session: the current one, or another session of the current user."""
    from sessions_app.services import session_access

    user_id = current_user_id.get()
    target = session_id or current_session_id.get()
    if not target:
        raise ToolError("No session: this tool only works inside a chat session.")
    if user_id is None:
        if session_id and session_id != current_session_id.get():
            raise ToolError(f"Session {session_id} not found.")
        session = Session.objects.filter(pk=target).first()
        if session is None:
            raise ToolError(f"Session {target} not found.")
        return session
    from django.contrib.auth import get_user_model

    user = get_user_model()(pk=user_id)
    try:
        return session_access(user=user, session_id=target)
    except NaviError as exc:
        raise ToolError(exc.message) from None


# Words that say when, or that a reminder is wanted, not what it is about: the recall's own vocabulary, and
# English function words.
_NOT_WHAT = FUNCTION_WORDS | frozenset("""remind reminder reminders reminding alarm alarms alert alerts nudge
nudges ping pings notify notification recall recalls schedule timer recurring repeat repeating every hourly daily
weekly monthly yearly once twice thrice times second seconds minute minutes mins hour hours hrs week weeks month
months year years today tomorrow tonight morning afternoon evening night noon midnight monday tuesday wednesday
thursday friday saturday sunday next until starting start ahead soon from later half please thanks thank okay
sure navi want""".split())


def _what_words(text: str) -> set[str]:
    """The words of four letters or more that say what (not when), lower case."""
    return {w for w in re.findall(r"[^\W\d_]+", text.lower()) if len(w) >= 4 and w not in _NOT_WHAT}


def _shares_a_word(some: set[str], others: set[str]) -> bool:
    """A word of ``some`` is one of ``others``, or the same word inflected ("stretch", "stretching": the
    same first four letters)."""
    stems = {w[:4] for w in others}
    return any(w[:4] in stems for w in some)


_COPIED_WORDS = 6  # this many words in a row of the tool's own description: the instruction copies it
MAX_ASKED_CHARS = 600  # of the user's words kept as a recall's instruction


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _takes_what(instruction: str, request: str) -> bool:
    """The instruction takes a word of what the request asks (``_what_words``, in any inflection). A request that
    says what in fewer than two words (a follow-up, "Okay, in 3 minutes then") leaves what to an earlier message:
    any instruction may say it."""
    wanted = _what_words(request)
    return len(wanted) < 2 or _shares_a_word(_what_words(instruction), wanted)


def _no_instruction(instruction: str, request: str, described: str) -> bool:
    """The instruction is certainly none of the model's own: no word of what at all ("", "Nudge!"), or a copy of
    what Navi says of the tool (``described``: six words in a row that the request does not say)."""
    if not _what_words(instruction):
        return True
    words, said, told = _words(instruction), f" {' '.join(_words(request))} ", f" {' '.join(_words(described))} "
    runs = (f" {' '.join(words[i:i + _COPIED_WORDS])} " for i in range(len(words) - _COPIED_WORDS + 1))
    return any(run in told and run not in said for run in runs)


def _asked_instruction(request: str) -> str:
    """The recall's instruction in the user's own words: the request without the times it says (they are the
    recall's time), so that when it fires the run does what was asked. "" where what is left still says a time
    (a clock time, a day, a time in words the grammar does not read, a request too long for it): a run that read
    it could schedule it again."""
    text = " ".join(request.split())
    said = said_times(text)
    if len(said.once) + len(said.every) > 1:
        return ""  # "in 5 minutes and again in 10": what is left of it is no one thing asked
    for words, _seconds in (*said.once, *said.every):
        text = re.sub(r"\s+".join(map(re.escape, words.split())), " ", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+([,.!?;:])", r"\1", " ".join(text.split())).strip(" ,.;:-")
    if len(_what_words(text)) < 2 or says_when(text):
        return ""
    return f"{ASKED_OPEN}{text[:MAX_ASKED_CHARS]}{ASKED_CLOSE}"


# How Navi frames the user's words as a recall's instruction (``_asked_instruction``), and what the user reads of it.
ASKED_OPEN = 'When due: remind the user of what they asked, "'
ASKED_CLOSE = '" (this recall is that reminder; set no other).'


def _for_the_user(instruction: str) -> str:
    """A recall's instruction as the user may read it: where it is Navi's framing of their own words, those words (the
    framing speaks to the model that runs the recall; round 29: the user read "When due: remind the user of what they
    asked, …" as the answer)."""
    asked = _asked_words(instruction)
    return instruction if asked is None else f'a reminder of what you asked, "{asked}"'


def _asked_words(instruction: str) -> str | None:
    """The user's words of an instruction Navi framed (``_asked_instruction``), or None for any other instruction."""
    if instruction.startswith(ASKED_OPEN) and instruction.endswith(ASKED_CLOSE):
        return instruction[len(ASKED_OPEN):-len(ASKED_CLOSE)]
    return None


# A request that also names a clock time or a day: its times are the model's to combine.
_CLOCK_WORDS = re.compile(r"\b(?:\d{1,2}:\d{2}|\d{1,2}\s*(?:am|pm)|at\s+\d{1,2}|o'?clock|noon|midnight|today|tonight|"
                          r"tomorrow|morning|afternoon|evening|night|monday|tuesday|wednesday|thursday|friday|"
                          r"saturday|sunday|\d{4}-\d{2}-\d{2})\b")


# A request that says when a repeat begins ("starting next month", "from the 1st"; "from now on" says now).
_START_WORDS = re.compile(r"\b(?:(?:start(?:s|ing)?|from|beginning|begin|after)\b(?!\s+(?:now|today)\b)|until\b|"
                          r"till\b|next\b|(?:january|february|march|april|june|july|august|september|october|"
                          r"november|december|\d{1,2}(?:st|nd|rd|th))\b)")


def _duration_words(seconds: int) -> str:
    """A first trigger one interval from now, as the grammar writes it ("in 60 minutes")."""
    return f"in {seconds // 60} minutes" if seconds % 60 == 0 else f"in {seconds} seconds"


def _confirm(recall: Recall) -> str:
    line = services.describe(recall, now=timezone.now())
    if recall.call_type == Recall.CallType.IMMEDIATE:
        line += " (it starts as soon as the session is idle; if this turn is still running, within about a minute)"
    # What it will do, in the instruction's own words: "recurring recall <id> every 1 hour" alone does not say it
    # is the reminder to drink water (what the user reads as the honest summary is ``_said``).
    what = " ".join(recall.additional_context_message.split())
    asked = _asked_words(what)
    if asked is not None:
        # Navi's framing of the user's words is for the run when the recall fires; shown it here, both models quoted
        # it to the user as the reminder ("The reminder is set to "When due: remind the user of …"", round 29).
        return f"Recall scheduled: {line}. Reminder: \"{_clipped(asked)}\""
    return f"Recall scheduled: {line}. Instruction: {_clipped(what)}"


def _said(recall: Recall) -> str:
    """The recall in words for the user (``agent.ports.SUMMARY``): when, how often, and what."""
    now = timezone.now()
    when = f"{describe_delta(recall.trigger_at, now=now)} ({recall.trigger_at.astimezone(UTC):%H:%M} UTC)"
    if recall.call_type == Recall.CallType.IMMEDIATE:
        when = "as soon as this conversation is idle"
    elif recall.interval_seconds:
        when += f", then every {services.interval_words(recall.interval_seconds)}"
    what = _for_the_user(" ".join(recall.additional_context_message.split()))
    return f"Scheduled {when}: {_clipped(what)}"


def _clipped(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis saying so."""
    return text[:limit] + ("…" if len(text) > limit else "")


class ScheduleRecallTool(Tool):
    name: ClassVar[str] = SCHEDULE_RECALL
    # Navi's framing of the user's words as an instruction (``_asked_instruction``): for the run when it fires.
    framing: ClassVar[tuple[str, ...]] = (ASKED_OPEN, ASKED_CLOSE)
    description: ClassVar[str] = (
        "Set a reminder or schedule future work for yourself, once or repeating (a 'recall' of this session): "
        "when it fires you wake up, "
        "read your instruction and continue with your tools while the user may watch live. Use it to check "
        "something later (build logs in 30 minutes), poll something periodically, or continue heavy work "
        "without blocking the chat. call_type: 'once' (at 'when'), 'recurring' (first at 'when', then every "
        "interval_seconds), 'immediate' (as soon as possible). A session has at most one pending recall: to "
        "replace it, first call manage_recall(action=\"cancel\"). Prefer relative times for 'when' ('30m', "
        "'2h 15m', 'in 3 hours', 'tomorrow at 09:00'); use an ISO 8601 time only if you know the user's "
        "timezone, and pass timezone_offset (±HH:MM) with absolute or clock times when the user's timezone is "
        "known (otherwise they are UTC). " + INSTRUCTION_RULES
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "call_type": {"type": "string", "enum": ["once", "recurring", "immediate"],
                          "description": "'once' at 'when'; 'recurring' from 'when' on; 'immediate' right now."},
            "when": {"type": "string", "description": "Trigger time, required for once/recurring. Relative "
                     "formats preferred: '30m', '2h 15m', 'in 3 hours', 'tomorrow at 09:00'. ISO 8601 only if "
                     "the timezone is known.", GRAMMAR_PATTERN: WHEN_PATTERN},
            "timezone_offset": {"type": "string", "description": "±HH:MM, e.g. '+02:00': the user's timezone "
                                "for absolute and clock times, when known."},
            "interval_seconds": {"type": "integer", "minimum": 1, "description": "Repeat interval in seconds, "
                                 "required for recurring (e.g. 300 = every 5 minutes)."},
            "internal_comment": {"type": "string", "description": "Short human-readable note (shown in the UI)."},
            "on_approval": {"type": "string", "enum": ["deny", "park"], "description": "A step that needs the "
                            "user's approval (shell, SSH, code, posting data): 'deny' (default) skips it, 'park' "
                            "waits for the user to approve. Use 'park' only if the user asked for such steps."},
            "allowed_tools": {"type": "array", "items": {"type": "string", DOMAIN_KEY: TOOLS}, "description": "Optional: the only "
                              "tools the run may use (default: this profile's tools that need no approval)."},
            "max_iterations": {"type": "integer", "minimum": 1, "description": "Optional cap on steps per run."},
            "max_seconds": {"type": "integer", "minimum": 10, "description": "Optional cap on seconds of work per run."},
            "additional_context_message": {"type": "string", "description": "Your self-instruction, written as "
                                           "a todo naming tools, files or URLs. " + INSTRUCTION_RULES},
        },
        "required": ["call_type", "additional_context_message"],
        # Which call types need which fields, in standard JSON Schema: arguments are validated against
        # it, and a constrained call's grammar turns it into one variant per call type (agent.decide),
        # so a one-off reminder cannot be generated without its time.
        "allOf": [
            {"if": {"properties": {"call_type": {"const": "once"}}}, "then": {"required": ["when"]}},
            {"if": {"properties": {"call_type": {"const": "recurring"}}},
             "then": {"required": ["when", "interval_seconds"]}},
        ],
    }

    def records(self, params: dict[str, Any]) -> bool:
        """A recall keeps words for later: a file they name is not read now (``Tool.records``)."""
        return True

    def doubt(self, params: dict[str, Any], request: str) -> Doubt | None:
        """A call the request's own relative time contradicts, read with the recall time grammar: "in 3
        minutes" set for 17:00 (the 1.5B computed absolute times wrongly), or to run now (the 0.5B's
        'immediate'); "every hour" set once, every 5 minutes, or first at 07:00 the next morning (a first
        time further away than one interval). The fix is the user's own words. A
        request that also names a clock time or a day, or more than one time, is left to the model.

        Also an instruction that takes none of the words of what the user asked for (the 0.5B's "I'm going to
        set a reminder for you tomorrow at 20:54Z." for "Give me a nudge to stretch my legs 3 minutes from
        now"): when it fires, the recall would do something nobody asked for. No fix: the model writes it again
        (its words may say it in others: a follow-up, a synonym, another language). Only where the request says
        what in two words or more (a follow-up such as "Okay, in 3 minutes then, thanks" says only when: what it
        is about was said before).

        An instruction that is certainly none (no word of what: "", "Nudge!"; or six words in a row of what Navi
        says of this tool, which the 0.5B copied; rounds 25 and 26) is the user's own words without their times
        (``_asked_instruction``), with the time's fix where there is one; not in a recall's own run, whose request
        is no words of the user's, nor where the words left still say a time: there such an instruction is written
        again by the model, like chatter."""
        timing = self._time_doubt(params, request)
        instruction = str(params.get("additional_context_message") or "")
        taken = _takes_what(instruction, request)
        none_of_its_own = _no_instruction(instruction, request, self._own_words())
        own = self._asked(request) if none_of_its_own else ""
        if timing is not None:
            if own and timing.fix is not None:
                return Doubt(reason=f"{timing.reason}; and the instruction {instruction[:120]!r} says nothing of what "
                                    "they asked for: it is their own words now",
                             fix={**timing.fix, "additional_context_message": own})
            return timing
        kind = str(params.get("call_type") or "").strip().lower()
        if kind in ("once", "recurring") and request.strip() and not says_when(request):
            # A time nobody said (the 1.5B set a reminder at 14:30 for "write down for me that the plumber needs
            # calling"). Advisory: a follow-up may leave the time to an earlier message, so a call made again runs.
            return Doubt(reason=f"the user's words ({request[:160]!r}) say no time for a recall, so it was not "
                                "scheduled. If they want a reminder, ask them when; otherwise do what they asked.",
                         answer=True, repeated_runs=True)
        if kind == "immediate" and request.strip() and not says_when(request):
            # Work for later, started now: the 0.5B set its note as an immediate recall ("Put this in a note: I need
            # to ring the plumber about invoice 8907.", round 20), and the user got no note. Advisory: work the
            # user wants done in the background says no time either, and a call made again runs.
            return Doubt(reason=f"the user's words ({request[:160]!r}) say no time, so no recall was scheduled. "
                                "Schedule one only if they want work done in the background; otherwise do what "
                                "they asked.", answer=True, repeated_runs=True)
        if own:
            return Doubt(reason=f"the instruction {instruction[:120]!r} says nothing of what the user asked for "
                                f"({request[:160]!r}): it is their own words now",
                         fix={"additional_context_message": own})
        if not taken or (none_of_its_own and instruction.strip()):
            # No word of the request, or a copy of Navi's words the user's cannot replace (a request of one word of
            # what: "Remind me to stretch in 10 minutes"; the review, round 26): the model writes it.
            return Doubt(reason=f"the instruction {instruction[:120]!r} says nothing of what the user asked for "
                                f"({request[:160]!r}): write in additional_context_message what the recall is to "
                                "do, with the user's own words")
        return None

    @staticmethod
    def _asked(request: str) -> str:
        """The user's words as the instruction (``_asked_instruction``), in a turn a person started: in a recall's
        own run the request is the recall's prompt, no words of the user's."""
        guard = current_guard.get()
        return "" if guard is not None and guard.rules is not None else _asked_instruction(request)

    @classmethod
    def _own_words(cls) -> str:
        """What Navi tells the model of this tool: an instruction that copies it says nothing the user asked."""
        return " ".join([cls.description, *(str(p.get("description") or "")
                                            for p in cls.parameters["properties"].values())])

    def _time_doubt(self, params: dict[str, Any], request: str) -> Doubt | None:
        """The call's time, against the one relative time the request says (``doubt``)."""
        said = said_times(request)
        if len(said.once) + len(said.every) != 1 or not said.plain or _CLOCK_WORDS.search(request.lower()):
            return None
        kind = str(params.get("call_type") or "").strip().lower()
        if said.every:
            words, seconds = said.every[0]
            interval = params.get("interval_seconds")
            start = self._ahead(params, allow_past=True)
            # A start further away than one interval of less than a day is no start the user said (the 1.5B began
            # "every hour" at 07:00 the next morning); a longer repeat may start later ("every week starting
            # next month", "from the 1st"), and so may one whose request says when it starts.
            late = (start is not None and seconds < 86400 and not _START_WORDS.search(request.lower())
                    and (start - timezone.now()).total_seconds() > seconds * 1.1)
            if (kind == "recurring" and isinstance(interval, int | float) and abs(interval - seconds) <= seconds * 0.1
                    and start is not None and not late):
                return None  # as asked (a start the parser cannot read, "every 60 minutes", is fixed below)
            fix: dict[str, Any] = {"call_type": "recurring", "interval_seconds": seconds}
            if start is None or late:
                fix["when"] = _duration_words(seconds)
            return Doubt(reason=f"the user asked for a repeat ({words!r}): call_type 'recurring', interval_seconds "
                                f"{seconds}", fix=fix)
        words, seconds = said.once[0]
        at = self._ahead(params) if kind == "once" else None
        if at is not None and abs((at - (timezone.now() + timedelta(seconds=seconds))).total_seconds()) <= max(
                60, seconds * 0.1):
            return None
        when = words if self._ahead({"when": words}) is not None else _duration_words(seconds)  # "a 3-minute reminder"
        return Doubt(reason=f"the user said {words!r}, not call_type {kind!r} with when {params.get('when')!r}",
                     fix={"call_type": "once", "when": when, "interval_seconds": None})

    @staticmethod
    def _ahead(params: dict[str, Any], *, allow_past: bool = False) -> Any:
        """When ``when`` triggers (None: missing, unreadable or past)."""
        try:
            return parse_when(str(params.get("when") or ""), now=timezone.now(),
                              timezone_offset=params.get("timezone_offset") or None, allow_past=allow_past)
        except (WhenError, BadRequest):
            return None

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        recall = await sync_to_async(self._schedule)(params)
        return ToolResult(success=True, output=_confirm(recall),
                          metadata={"recall_id": str(recall.id), SUMMARY: _said(recall)})

    @staticmethod
    def _schedule(params: dict[str, Any]) -> Recall:
        session = _session_for(None)
        try:
            return services.recall_schedule(
                session=session,
                call_type=str(params.get("call_type") or "").strip().lower(),
                when=params.get("when"),
                timezone_offset=params.get("timezone_offset") or None,
                interval_seconds=params.get("interval_seconds"),
                internal_comment=str(params.get("internal_comment") or ""),
                additional_context_message=str(params.get("additional_context_message") or ""),
                **{k: params[k] for k in ("on_approval", "allowed_tools", "max_iterations", "max_seconds")
                   if k in params},
            )
        except NaviError as exc:
            raise ToolError(exc.message) from None


class ManageRecallTool(Tool):
    name: ClassVar[str] = "manage_recall"
    description: ClassVar[str] = (
        "Manage scheduled recalls. action='cancel' removes the session's pending recall (the standard step "
        "before scheduling a different one); action='skip' skips the next occurrence of a recurring recall "
        "(moves it one interval later, never into the past); action='list' shows all recalls of the session "
        "(pending, fired, cancelled) with their recent runs. session_id defaults to the current session; it "
        "may name another session of the same user."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["cancel", "skip", "list"], "description": "cancel, skip or list."},
            "session_id": {"type": "string", "description": "Target session (defaults to the current one)."},
        },
        "required": ["action"],
    }

    async def execute(self, params: dict[str, Any]) -> ToolResult:
        action = str(params.get("action") or "").strip().lower()
        if action not in {"cancel", "skip", "list"}:
            raise ToolError("action must be 'cancel', 'skip' or 'list'.")
        output = await sync_to_async(self._run)(action, params.get("session_id") or None)
        return ToolResult(success=True, output=output)

    @staticmethod
    def _run(action: str, session_id: str | None) -> str:
        session = _session_for(str(session_id) if session_id else None)
        try:
            if action == "cancel":
                recall = services.recall_cancel(session=session)
                return f"Cancelled the {recall.call_type} recall {recall.id}." if recall else (
                    "There is no pending recall to cancel in this session.")
            if action == "skip":
                recall = services.recall_skip(session=session)
                return f"Skipped one occurrence. Next: {services.describe(recall)}."
        except NaviError as exc:
            raise ToolError(exc.message) from None
        return _render_list(services.recall_list(session=session, limit=20))


def _render_list(recalls: list[Recall]) -> str:
    if not recalls:
        return "This session has no recalls."
    now = timezone.now()
    lines = [f"Recalls of this session ({len(recalls)}, newest first):"]
    for recall in recalls:
        lines.append(f"- {services.describe(recall, now=now)}; fired {recall.fire_count}x"
                     + (f"; note: {recall.internal_comment}" if recall.internal_comment else ""))
        for run in list(recall.runs.all())[:3]:
            lines.append(f"    run due {run.due_at.isoformat()}: {run.outcome}"
                         + (f" ({run.error[:120]})" if run.error else ""))
    return "\n".join(lines)
