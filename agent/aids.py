"""Local-model aids: what the loop does for small models that write tool calls as text,
repeat calls or call tools on a greeting (issue "real local model").

Each aid is on when the profile's ``local_model_aids_enabled`` and the global
``LLM_LOCAL_MODEL_AIDS`` are both true and its name (in brackets) is not in the profile's
``local_model_aids_off`` (docs/real-model.md lists them with their tests):
- [text_calls] a tool call written as JSON in the text (bare, fenced, a list, ``<tool_call>``)
  naming a known tool is run (``agent.textcalls``); text that may be such a call is held back while
  streaming (``agent.streaming``);
- [repair] a malformed call gets one repair prompt, then the model is told it failed and must answer;
- [repeat_guard] the same tool with the same arguments as the previous step is not run again, and the model is
  then ordered to answer (the tool list stays in the prompt so a local
  server's prompt cache survives) and any further call is neither run nor shown;
- of several calls written as text in one reply, only the first runs;
- [greeting] a greeting gets no tools;
- [nudges] after tool results, a one-line nudge to answer when the results suffice.

For a model seen writing its calls as text (a small local model; a model that fills the
structured ``tool_calls`` field is never affected, see ``observe``) three more:
- [shortlist] only the tools the user's message points at are offered (by name, or by a
  few keywords per tool), none when nothing points at a tool; the prompt's lines that show calls
  of other tools are left out, a call of another tool is answered "not for this request", and
  the schemas are compact (first sentence of the description, no parameter descriptions);
- [answer_after_success] once every call of a step succeeded and no todo step is open, the
  model must answer (calls it still writes are neither run nor shown);
- [todo_progress] a successful call (other than ``todo``) marks the first open todo step done;
- [template_args] a call that fills one of the prompt's call templates (same literal values, every
  argument the template shows) runs with the template's arguments only: the 0.5B model added
  arguments of its own (``interval_seconds`` to a one-off reminder, ``profile_id: "user"`` to a
  subagent) that made a good call fail;
- [keep_request] a reminder's self-instruction that lacks a file path or address of the user's
  request gets those appended (the model wrote "check the log" for "check /tmp/build.log");
  such a subagent task is replaced by the request ("read_file_facts.txt" for "read the file facts.txt");
- [todo_progress] also: once a text caller set its todo list, ``todo`` is no longer offered this
  turn (setting it again is not run), and the nudge names the next step with the call template
  of the tool it points at;
- [refusal_retry] a text caller that answers a request its tools are for with a refusal ("I'm
  sorry, but I can't assist with that", seen on the two-step todo task) is asked once more, with
  the call template of the tool the request names first; the refusal is held back meanwhile;
- [one_off_reminder] a text caller's recurring reminder for a request that asks for no repetition
  ("remind me in 2 minutes") is made a one-off (the 0.5B model scheduled one every minute);
- [nudges] also: a text caller offered no tool for its request is told to answer in words (the
  0.5B model refused a story: "I can't assist with that").
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agent.llm.base import ChatMessage, ToolCallRequest
from agent.streaming import REFUSAL_OPENERS, StreamedCall
from agent.textcalls import extract_text_tool_calls
from agent.turn import Turn

SMALL_TALK = re.compile(
    r"^\s*(hi|hello|hey|hallo|hiya|yo|good (morning|afternoon|evening|night)|thanks?( a lot| you)?|thank you|"
    r"ok(ay)?|cool|great|nice|bye|goodbye|see you|how are you( doing)?)\b[\s\w]{0,12}[!.,?\s]*$",
    re.IGNORECASE,
)


def repair_note(malformed: str | None, unknown: str | None, names: list[str], repaired: bool,
                known: frozenset[str] | set[str] = frozenset()) -> str:
    if malformed and repaired:
        return ("The tool call failed again: it still could not be parsed, so no tool was run. "
                "Answer the user now without the tool, and say what you could not do.")
    if malformed:
        return (f"Your tool call could not be parsed: {malformed} Reply with only one JSON object of the form "
                '{"name": "<tool>", "arguments": {...}} and nothing else.')
    if unknown in known:  # a real tool, left out of this request's shortlist
        return (f"The tool {unknown!r} is not for this request. "
                + (f"Use {' or '.join(names)}, or answer the user directly." if names else "Answer the user directly."))
    return (f"There is no tool named {unknown!r}. Available tools: {', '.join(names)}. "
            "Use one of them, or answer the user directly.")


# What each builtin tool is for, as words a user's request would contain (regexes, word-bounded,
# case-insensitive). A tool without an entry is matched by the words of its name.
HINTS: dict[str, str] = {
    "get_current_datetime": r"time|date|today|tonight|now|day|weekday|clock|tomorrow|yesterday|month|year",
    "filesystem": r"files?|folders?|director(y|ies)|read|open|lines?|contents?|\w[\w-]*\.[a-z][a-z0-9]{1,4}|/[\w./-]+",
    "user_notes": r"notes?|note down|jot|write down|notebook",
    "memory_save": r"remember|memori[sz]e|don't forget|do not forget|keep in mind|from now on",
    "memory_search": r"remember|recall|what do you know|about me",
    "schedule_recall": r"remind(er|ers)?|later|in \d+ (minutes?|hours?|days?)|every|tomorrow|schedule|wake me",
    "todo": r"todo|to-do|checklist|steps?|tasks? list|plan",
    "spawn_agent": r"sub-?agents?|delegate|helper agent",
    "switch_profile": r"profile|switch|mode",
    "web_search": r"search|look up|google|online|internet|web|news|latest|weather|price",
    "web_view": r"https?://\S+|web ?page|website|url|link",
    "http_request": r"https?://\S+|api|http|endpoint|request",
    "terminal": r"run|command|shell|terminal|disk|process(es)?|install|ls|df|ps|grep",
    "code_exec": r"code|python|script|calculate|compute|program",
    "ssh_exec": r"ssh|server|remote|host",
    "image_view": r"image|picture|photo|screenshot|png|jpe?g",
}


def shortlist(request: str, names: list[str]) -> list[str]:
    """The tools ``request`` points at: those it names as identifiers ("spawn_agent"; only those,
    when it names any), else those whose keywords it contains; [] when nothing points at a tool."""
    text = request or ""
    named = [n for n in names if "_" in n and re.search(rf"\b{re.escape(n)}\b", text)]
    if named:
        return named
    return [n for n in names if re.search(_hint(n), text, re.IGNORECASE)]


def _hint(name: str) -> str:
    """The pattern of the words that point at tool ``name`` (its HINTS, else the words of its name)."""
    return rf"(?<![\w.])(?:{HINTS.get(name, '|'.join(map(re.escape, name.split('_'))))})(?!\w|\.\w)"


# Per model ("backend:model"): "text" once it was seen writing a call as text, "structured" once it
# filled tool_calls. Only text callers get the shortlist and the answer-after-success aid.
_STYLES: dict[str, str] = {}


def observe(model: str, *, structured: bool, text: bool) -> None:
    if structured:
        _STYLES[model] = "structured"
    elif text and _STYLES.get(model) != "structured":
        _STYLES[model] = "text"


def writes_text_calls(model: str) -> bool:
    return _STYLES.get(model) == "text"


@dataclass
class LoopState:
    """Per-turn state of the local-model aids."""

    aids: bool
    greeting: bool
    start: int  # index in turn.history where this turn's messages begin
    model: str = ""  # "backend:model", the key of ``observe``
    off: frozenset[str] = frozenset()  # aids this profile switched off one by one
    known_text_caller: bool = False  # known as a text caller when the turn began
    force_answer: bool = False
    repaired: bool = False
    told_unknown: bool = False
    repeats: int = 0
    previous_calls: set[tuple[str, str]] = field(default_factory=set)
    todo_set: bool = False  # this turn set the todo list (a text caller must not set it again)
    asked_again: bool = False  # a refusal was answered with the call template once
    todo_reminders: int = 0  # calls of todo after this turn set it, answered with the next step

    @property
    def shortlisted(self) -> bool:
        """Its tools are shortlisted this turn (a known text caller, the aid on)."""
        return self.known_text_caller and self.on("shortlist")

    def on(self, aid: str) -> bool:
        return self.aids and aid not in self.off

    @property
    def small(self) -> bool:
        return self.aids and writes_text_calls(self.model)

    def offer(self, names: list[str], request: str) -> list[str]:
        """The tools offered in the next request."""
        if self.greeting:
            return []
        # Decided once a turn: the same tools in every request keep a local server's prompt cache.
        offered = shortlist(request, names) if self.shortlisted else names
        if self.todo_set and self.known_text_caller and self.on("todo_progress"):
            # Its list is set: Qwen 0.5B kept copying the todo template instead of doing the steps.
            offered = [n for n in offered if n != "todo"]
        return offered

    def ran(self, call: ToolCallRequest, success: bool) -> None:
        if success and call.name == "todo" and call.arguments.get("action") == "set":
            self.todo_set = True

    def may_ask_again(self, turn: Turn) -> bool:
        """A refusal may be answered with a call template: a shortlisted text caller, once, before
        any tool ran this turn (a refusal after a failed tool is the model's honest answer)."""
        return (self.small and self.shortlisted and self.on("refusal_retry") and not self.asked_again
                and not any(m.role == "tool" for m in turn.history[self.start:]))

    def after_step(self, results: list[tuple[str, bool]], todo: Callable[[], list[dict[str, Any]]],
                   advance: Callable[[str], None]) -> None:
        """After a step's tools ran: (tool, success) of each call. A small model answers now
        when every call succeeded and no todo step is open; a success advances the todo list."""
        if not self.small or not results or not all(ok for _, ok in results):
            return
        if self.on("todo_progress"):
            for tool, _ok in results:
                if tool != "todo":
                    advance(tool)
        if self.on("answer_after_success") and not any(s.get("status") not in ("done", "failed") for s in todo()):
            self.force_answer = True


@dataclass(frozen=True, slots=True)
class Decision:
    calls: list[ToolCallRequest]
    content: str
    note: str | None = None  # a repair/unknown-tool message for the model: run another iteration
    replaced: bool = False  # the model's text was a call nobody may run: show the fallback instead
    from_text: bool = False  # the calls were written as text (a small local model)


ANSWER_NOW = ("Answer the user now in plain language with what you have. Do not call any tool "
              "and do not write a tool call.")
AFTER_TOOLS = ("The tool results above are available. If they answer the user's request, reply to the user now; "
               "call another tool only if it is really needed.")


IN_WORDS = "No tool is needed for this request. Answer the user directly in words."


def next_step(todo: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    return next((s for s in todo or [] if s.get("status") not in ("done", "failed")), None)


def step_instruction(step: dict[str, Any], turn: Turn, offered: list[str]) -> str:
    """"Next step …: do it now", with the call template of the tool the step points at, if any."""
    text = f"Next step of your todo list: {step.get('title', '')}. Do it now with one tool call."
    tools = shortlist(str(step.get("title", "")), [n for n in offered if n != "todo"])
    templates = call_templates(prompt_of(turn), tools[:1])
    if templates:
        text += " " + templates[0][templates[0].find("{"):]
    return text


def nudges(turn: Turn, state: LoopState, allow: bool, todo: list[dict[str, Any]] | None = None,
           offered: list[str] | None = None) -> list[ChatMessage]:
    """Short steering messages for small local models (aids only; never stored)."""
    if not state.aids or not turn.history:
        return []
    if state.force_answer:
        return [ChatMessage(role="system", content=ANSWER_NOW)]
    if not allow and state.shortlisted and not state.greeting and state.on("nudges"):
        # Shortlisted to nothing: the prompt still says "otherwise write a tool call".
        return [ChatMessage(role="system", content=IN_WORDS)]
    if allow and turn.history[-1].role == "tool" and state.on("nudges"):
        step = next_step(todo)
        if step is not None and state.small and state.on("todo_progress"):
            # Qwen 0.5B set its todo list, then set the same list again instead of starting.
            return [ChatMessage(role="system", content=step_instruction(step, turn, offered or []))]
        return [ChatMessage(role="system", content=AFTER_TOOLS)]
    return []


def compact_schemas(schemas: list[dict[str, Any]], prompt: str = "") -> list[dict[str, Any]]:
    """Tool schemas without parameter descriptions, each description cut to its first sentence,
    or left out when ``prompt`` shows a call template of the tool: the 0.5B model copied
    description text into its arguments (a memory_save whose value was the tool's description)."""
    out = []
    for schema in schemas:
        function = dict(schema.get("function") or {})
        description = str(function.get("description") or "")
        templated = bool(call_templates(prompt, [str(function.get("name") or "")]))
        function["description"] = "" if templated else re.split(r"(?<=[.!?])\s", description, maxsplit=1)[0]
        params = dict(function.get("parameters") or {})
        params["properties"] = {name: {k: v for k, v in prop.items() if k != "description"}
                                for name, prop in (params.get("properties") or {}).items()}
        function["parameters"] = params
        out.append({**schema, "function": function})
    return out


def prompt_of(turn: Turn) -> str:
    """The profile prompt this turn's model reads (a subagent's own, when its profile has one)."""
    profile = turn.profile
    return (profile.subagent_system_prompt or profile.system_prompt) if turn.subagent else profile.system_prompt


def _calls_of(names: list[str]) -> re.Pattern[str]:
    """Matches a written call (``"name": "<tool>"``) of one of ``names``."""
    return re.compile(r'"name":\s*"(' + "|".join(map(re.escape, names)) + r')"')


def call_templates(prompt: str, names: list[str]) -> list[str]:
    """The lines of ``prompt`` that show a call of one of ``names``."""
    if not names:
        return []
    pattern = _calls_of(names)
    return [line.strip() for line in (prompt or "").split("\n") if pattern.search(line)]


def _template_calls(prompt: str, tool: str) -> list[dict[str, Any]]:
    """The argument objects of the prompt's call templates of ``tool``."""
    out = []
    for line in call_templates(prompt, [tool]):
        start = line.find("{")
        try:
            obj, _ = json.JSONDecoder().raw_decode(line[start:])
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("name") == tool and isinstance(obj.get("arguments"), dict):
            out.append(obj["arguments"])
    return out


def _placeholder(value: Any) -> bool:
    if isinstance(value, list):
        return all(_placeholder(v) for v in value)
    return isinstance(value, str) and bool(re.search(r"<[^<>]+>", value))  # "<file name>", "<N>m"


def _named_in(value: Any, request: str) -> bool:
    """Some word or number of ``value`` is in the user's ``request`` ("Asia/Tokyo" for "in Tokyo")."""
    words = [w for w in re.findall(r"[\w.-]+", json.dumps(value, default=str)) if len(w) >= 3 or w.isdigit()]
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", request, re.IGNORECASE) for w in words)


def fit_template(call: ToolCallRequest, prompt: str, request: str = "") -> ToolCallRequest:
    """``call`` without the arguments no template shows, when it fills one of ``prompt``'s call
    templates of its tool: every argument the template shows is given, and the template's literal
    values (``"action": "read"``) are the call's. An argument whose value the user's ``request``
    names is kept (a timezone, a line number); a template without arguments says nothing about
    them. Any other call is returned as it is."""
    if call.arguments_error or not isinstance(call.arguments, dict):
        return call
    for template in _template_calls(prompt, call.name):
        if not template:
            continue
        fills = all(key in call.arguments and (_placeholder(value) or call.arguments[key] == value)
                    for key, value in template.items())
        dropped = {k for k, v in call.arguments.items() if k not in template and not _named_in(v, request)}
        if fills and dropped:
            return replace(call, arguments={k: v for k, v in call.arguments.items() if k not in dropped})
        if fills:
            return call
    return call


_ADDRESS = re.compile(r"(?<![\w./~-])(?:https?://[\w./~%?=&:+#-]*\w|~?/[\w./~-]*\w"
                      r"|[\w./-]*\w\.(?:log|txt|md|json|ya?ml|csv|conf|cfg|ini|py|sh|toml))(?![\w/])")


# What a future turn or a subagent must be told for each tool: the argument holding its instruction.
_INSTRUCTION_ARGS = {"schedule_recall": "additional_context_message", "spawn_agent": "task"}


_DELEGATION = re.compile(r"^(?:(?:please|could you|can you|would you)\s+)?(?:use|ask|get|spawn|start|have|launch)\s+"
                         r"(?:a|an|the|one|some)?\s*(?:sub-?agents?|helpers?(?: agents?)?)\b[^.?!]*?\b(?:to|that)\s+",
                         re.IGNORECASE)


def request_in_instruction(call: ToolCallRequest, request: str) -> ToolCallRequest:
    """A reminder or subagent call whose instruction lacks a path or address of the user's
    ``request`` gets the request appended: the future turn or the subagent must know what to use."""
    key = _INSTRUCTION_ARGS.get(call.name)
    if key is None or not isinstance(call.arguments, dict):
        return call
    instruction = str(call.arguments.get(key) or "")
    missing = [a for a in _ADDRESS.findall(request or "")
               if not re.search(rf"(?<![\w./-]){re.escape(a)}(?![\w/-])", instruction)]
    if not instruction or not missing:
        return call
    if call.name == "spawn_agent":
        # The template asks for the user's request; a subagent copied the garbled task's
        # "read_file_facts.txt" even with the request appended, and called spawn_agent itself when
        # the request still said "use a subagent (spawn_agent) to".
        task = _DELEGATION.sub("", request.strip(), count=1)
        return replace(call, arguments={**call.arguments, key: task[:1].upper() + task[1:]})
    # Only the missing names: the user's whole sentence ("Remind me in 2 minutes to …") in a recall's
    # instruction would make the small model schedule the reminder again when it fires.
    return replace(call, arguments={**call.arguments, key: f"{instruction} ({', '.join(missing)})"})


def trim_templates(messages: list[ChatMessage], offered: list[str], names: list[str]) -> list[ChatMessage]:
    """Drop the system prompt's lines that show a call of a tool this request does not offer (a
    small model copies any call it sees)."""
    hidden = [n for n in names if n not in offered]
    if not hidden or not messages or messages[0].role != "system" or not messages[0].content:
        return messages
    pattern = _calls_of(hidden)
    kept = [line for line in messages[0].content.split("\n") if not pattern.search(line)]
    return [replace(messages[0], content="\n".join(kept)), *messages[1:]]


REFUSAL = re.compile(r"\A\s*(?:" + "|".join(re.escape(r).replace("'", "['\u2019]") for r in REFUSAL_OPENERS)
                     + r")\b", re.IGNORECASE)
REPETITION = re.compile(
    r"\b(?:every|each|daily|hourly|weekly|monthly|yearly|nightly|recurring|repeat\w*|regularly|periodically|until|"
    r"twice|thrice|times? an? (?:day|week|month|hour)|per (?:day|week|month|hour)|weekdays|weekends|keep reminding|"
    r"always|on (?:mon|tues|wednes|thurs|fri|satur|sun)days)\b", re.IGNORECASE)


# A request for a record, an example or a format: a call-shaped object in the answer is that data.
_ASKS_FOR_DATA = re.compile(r"\b(?:json|record|example|sample|format|schema|look(?:s)? like|show me what)\b", re.IGNORECASE)


def first_pointed(request: str, names: list[str]) -> str | None:
    """Of ``names``, the tool whose hint words come first in ``request``."""
    found = []
    for name in shortlist(request, names):
        match = re.search(rf"\b{re.escape(name)}\b|{_hint(name)}", request, re.IGNORECASE)
        found.append((match.start() if match else len(request), name))
    return min(found)[1] if found else None


def ask_again(turn: Turn, names: list[str]) -> str:
    """The note after a small model refused a request its tools are for."""
    tool = first_pointed(turn.goal, names)
    templates = call_templates(prompt_of(turn), [tool]) if tool else []
    start = (f"Start with this call, filled in for the request: {templates[0][templates[0].find('{'):]}" if templates
             else f"Start with a call of {tool}." if tool else "Start with one tool call.")
    return f"You can do this with your tools. {start}\nThe user's request: {turn.goal}"


def one_off(call: ToolCallRequest, request: str) -> ToolCallRequest:
    """A recurring reminder for a request that asks for no repetition, made a one-off."""
    if (call.name != "schedule_recall" or not isinstance(call.arguments, dict)
            or call.arguments.get("call_type") != "recurring" or REPETITION.search(request or "")):
        return call
    arguments = {k: v for k, v in call.arguments.items() if k != "interval_seconds"}
    return replace(call, arguments={**arguments, "call_type": "once"})


def interpret(call: StreamedCall, turn: Turn, state: LoopState, allow: bool, names: list[str],
               known: set[str], todo: list[dict[str, Any]] | None = None) -> Decision:
    """What the model's answer means: tool calls to run, a final text, or a note to send back."""
    if not allow:
        # Calls of tools that were not offered (a greeting, "answer now") are never run nor shown.
        written = extract_text_tool_calls(call.text, known) if state.on("text_calls") else None
        wrote_call = bool(call.tool_calls) or bool(written and (written.calls or written.malformed or written.unknown_tool))
        if wrote_call:
            return Decision(calls=[], content=fallback_answer(turn.history[state.start:], state.greeting),
                             replaced=True)
        return Decision(calls=[], content=call.text)
    if call.tool_calls or not state.on("text_calls"):
        return Decision(calls=list(call.tool_calls), content=call.text)
    # A known text caller's reply that is one call plus a key of its own (the result it imagined) is
    # the call, unless the user asked for JSON.
    lenient = state.small and state.on("text_calls") and not _ASKS_FOR_DATA.search(turn.goal or "")
    found = extract_text_tool_calls(call.text, set(names), extra_keys_alone=lenient)
    if found.calls:
        # Small models append junk calls to the one they meant (a stray todo, a memory_search):
        # only the first call written as text runs.
        first = found.calls[0]
        if state.on("template_args"):
            first = fit_template(first, prompt_of(turn), turn.goal)
        if state.on("keep_request"):
            first = request_in_instruction(first, turn.goal)
        if state.on("one_off_reminder"):
            first = one_off(first, turn.goal)
        return Decision(calls=[first], content=found.remaining_text, from_text=True)
    if (state.may_ask_again(turn) and not found.malformed and not found.unknown_tool and len(call.text) < 300
            and REFUSAL.match(call.text)):
        state.asked_again = True
        return Decision(calls=[], content=call.text, note=ask_again(turn, names))
    step = next_step(todo)
    if found.unknown_tool == "todo" and state.todo_set and step is not None and state.todo_reminders < 2:
        state.todo_reminders += 1  # todo is no longer offered: its list is set (see offer)
        return Decision(calls=[], content=call.text,
                        note="Your todo list is already set. " + step_instruction(step, turn, names))
    if not state.on("repair"):
        return Decision(calls=[], content=call.text)
    if found.malformed or (found.unknown_tool and not state.told_unknown):
        note = repair_note(found.malformed, found.unknown_tool, names, state.repaired, known)
        if found.unknown_tool and state.small:
            # A small model copies the last thing it read: end with the request and the templates
            # of the offered tools (it once saved this very note as the user's note).
            note = "\n".join([note, f"The user's request: {turn.goal}",
                              *call_templates(prompt_of(turn), names)])
        state.repaired = state.repaired or bool(found.malformed)
        state.told_unknown = state.told_unknown or bool(found.unknown_tool)
        state.force_answer = state.force_answer or note.startswith("The tool call failed again")
        return Decision(calls=[], content=call.text, note=note)
    if found.unknown_tool:  # told once already: never show the call, answer with what this turn got
        return Decision(calls=[], content=fallback_answer(turn.history[state.start:], state.greeting), replaced=True)
    return Decision(calls=[], content=call.text)


def fallback_answer(this_turn: list[ChatMessage], greeting: bool) -> str:
    """What the user sees when the model only produced a call nobody may run: the last result
    that succeeded this turn, or a plain reply."""
    last = next((m for m in reversed(this_turn) if m.role == "tool" and m.content
                 and not m.content.startswith(("Error:", "Not run:"))), None)
    if last is not None:
        return f"Here is the result I got:\n\n{_unwrapped(last.content or '')[:2000]}"
    if greeting:
        return "Hello! How can I help you today?"
    return "I could not produce an answer this time. Please rephrase or try again."


_UNTRUSTED = re.compile(r"\A<untrusted(?:_data)?\b[^>]*>\n[^\n]*\n(.*)\n</untrusted(?:_data)?>\Z", re.DOTALL)


def _unwrapped(result: str) -> str:
    """A tool result without the untrusted-data envelope meant for the model."""
    match = _UNTRUSTED.match(result.strip())
    return match.group(1) if match else result
