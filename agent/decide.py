"""Constrained tool calls: a call generated under a JSON schema by the model server.

For a model that does not fill the structured ``tool_calls`` field (a small local model writes
its calls as text, and gets names and arguments wrong), Navi uses the server's grammar engine
(Ollama ``format``, OpenAI-compatible ``response_format``). How a step goes (``agent.loop``):

1. the model replies in its own way, with the tool definitions in its chat template: whether it
   answers or calls is its own first words — the likelihood of answering against calling, as the
   model was trained to weigh it. Prose streams to the user as the answer;
2. a reply that is a call of an offered tool with arguments valid for its schema runs as written;
3. any other attempt to call (a tool that does not exist, broken JSON, invalid arguments) is
   generated again under ``call_schema``::

       {"tool": <one of the offered names>, "arguments": <that tool's parameters>}

   so a tool that does not exist, or arguments of the wrong shape, cannot be produced. What a
   schema cannot express (a free-form object parameter, formats) is validated after generation
   (``parse_decision``), with one repair round.

Measured on the dev half of the broad suite (docs/benchmarks.md): a decision made entirely under
a schema (``{"action": "answer"} | {"action": "call", ...}``) called a tool for greetings and
general questions (0.5B: 9 of 24 first steps right), while the model's own first words told
answering from calling right 21 of 24 times. Nothing here depends on the wording of a request.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import json_repair
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent.llm.base import ChatMessage, ToolCallRequest
from agent.llm.http_common import new_call_id, parse_arguments
from agent.textcalls import ARG_KEYS, CALL_KEYS, NAME_KEYS

# The instruction at the end of a constrained call's request (never stored: the conversation before it is
# the prompt prefix the server has cached).
CALL = ('Write the one tool call the user\'s last message needs now, as {"tool": "<name>", "arguments": {...}}, '
        "with the argument values taken from the user's words.")


NO_TOOL = "none"  # the choice of no tool, where a decision offers it (``call_schema(none=True)``)


def call_schema(schemas: list[dict[str, Any]], *, none: bool = False) -> dict[str, Any]:
    """The JSON schema of one call of the offered tools (definitions ``{"type": "function", ...}``);
    ``none``: or of no call (``{"tool": "none"}``: the model answers in words instead)."""
    branches: list[dict[str, Any]] = []
    if none:
        branches.append({"type": "object", "properties": {"tool": {"const": NO_TOOL}}, "required": ["tool"],
                         "additionalProperties": False})
    for schema in schemas:
        function = schema.get("function") or {}
        name = str(function.get("name") or "")
        if name:
            branches.append({
                "type": "object",
                "properties": {"tool": {"const": name}, "arguments": grammar_parameters(function.get("parameters"))},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            })
    return {"anyOf": branches}


# A pattern only a constrained call's grammar applies (as "pattern"): what a tool's own parser reads,
# in the regex subset grammar engines compile. Not "pattern" itself: validation after generation and
# native callers keep the tool's full leniency (upper case, more forms), and the prompt omits it.
GRAMMAR_PATTERN = "x-navi-pattern"


def without_grammar_patterns(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The definitions as the model reads them: ``GRAMMAR_PATTERN`` removed (it only costs prompt tokens)."""
    return [_strip_pattern(s) for s in schemas]


def _strip_pattern(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_pattern(v) for k, v in node.items() if k != GRAMMAR_PATTERN}
    if isinstance(node, list):
        return [_strip_pattern(v) for v in node]
    return node


# Keywords a grammar engine needs; descriptions and the like only cost grammar size.
_KEEP = frozenset({"type", "properties", "required", "items", "enum", "const", "anyOf", "oneOf",
                   "additionalProperties", "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength"})


def grammar_parameters(parameters: Any) -> dict[str, Any]:
    """A tool's parameter schema reduced to what a grammar engine enforces (no descriptions,
    defaults or examples). A free-form object stays a free-form object: ``parse_decision``
    validates it against the full schema after generation."""
    if not isinstance(parameters, dict):
        return {"type": "object"}
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if key == GRAMMAR_PATTERN and isinstance(value, str):
            out["pattern"] = value
            continue
        if key not in _KEEP:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: grammar_parameters(prop) for name, prop in value.items()}
        elif key == "items" and isinstance(value, dict):
            out[key] = grammar_parameters(value)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            out[key] = [grammar_parameters(v) for v in value]
        elif key == "additionalProperties" and isinstance(value, dict):
            out[key] = grammar_parameters(value)
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out:
        out.pop("additionalProperties", None)
    variants = _case_variants(out, parameters.get("allOf"))
    if variants:
        return {"anyOf": [_without_optional_numbers(v) for v in variants]}
    return _without_optional_numbers(out) or {"type": "object"}


def _without_optional_numbers(node: dict[str, Any]) -> dict[str, Any]:
    """An object without its optional numeric properties (limits, offsets, caps): each has a default,
    and a small model under a grammar fills every property it is offered (``"limit": 1`` on a read
    returned the file's first line). A required number stays."""
    props = node.get("properties")
    if not isinstance(props, dict):
        return node
    required = set(node.get("required") or ())
    kept = {name: prop for name, prop in props.items()
            if name in required or not (isinstance(prop, dict) and prop.get("type") in ("integer", "number"))}
    return {**node, "properties": kept} if len(kept) != len(props) else node


def _case_variants(base: dict[str, Any], all_of: Any) -> list[dict[str, Any]] | None:
    """Conditions a grammar engine cannot read, as variants it can: an object whose ``allOf`` is made
    of ``{"if": {"properties": {D: {"const": v}}}, "then": {"required": [...]}}`` on one enumerated
    property D becomes one object per value of D, each requiring what its case requires (a one-off
    reminder then cannot be generated without its time) and offering no property that only other
    cases require or name. A case names its optional properties in ``then.properties`` (each ``{}``,
    which validation ignores): a todo ``set`` is then not offered the ``note`` of an ``update``, where
    the 0.5B model wrote its instructions. Anything else: None (the conditions are only validated
    after generation)."""
    if not isinstance(all_of, list) or not all_of or not isinstance(base.get("properties"), dict):
        return None
    cases: dict[Any, list[str]] = {}
    owned: dict[Any, list[str]] = {}
    key = None
    for rule in all_of:
        condition = (rule or {}).get("if") if isinstance(rule, dict) else None
        then = rule.get("then") if isinstance(rule, dict) else None
        props = condition.get("properties") if isinstance(condition, dict) else None
        if not (isinstance(props, dict) and len(props) == 1 and isinstance(then, dict)
                and set(then) <= {"required", "properties"} and isinstance(then.get("required", []), list)
                and isinstance(then.get("properties", {}), dict)
                and all(v == {} and n in base["properties"] for n, v in then.get("properties", {}).items())):
            return None
        (name, test), = props.items()
        if not isinstance(test, dict) or set(test) != {"const"} or key not in (None, name):
            return None
        key = name
        cases[test["const"]] = [str(r) for r in then.get("required", [])]
        owned[test["const"]] = [*cases[test["const"]], *map(str, then.get("properties", {}))]
    values = (base["properties"].get(key) or {}).get("enum")
    if not isinstance(values, list) or not set(cases) <= set(values):
        return None
    # A property some case requires or names belongs to that case: the other variants leave it out (a
    # read is not offered the content of a write).
    claimed = {name for names in owned.values() for name in names}
    variants = []
    for value in values:
        required = list(dict.fromkeys([*base.get("required", []), str(key), *cases.get(value, [])]))
        mine = {*required, *owned.get(value, [])}
        props = {name: prop for name, prop in base["properties"].items() if name not in claimed or name in mine}
        variants.append({**base, "properties": {**props, key: {"const": value}}, "required": required})
    return variants


def required_somewhere(parameters: Any) -> set[str]:
    """The parameters some call must give: required, or required by a case (``allOf`` of if/then)."""
    if not isinstance(parameters, dict):
        return set()
    needed = {str(n) for n in parameters.get("required") or ()}
    for rule in parameters.get("allOf") or ():
        then = rule.get("then") if isinstance(rule, dict) else None
        if isinstance(then, dict):
            needed |= {str(n) for n in then.get("required") or ()}
    return needed


def without_unsaid_options(arguments: dict[str, Any], parameters: Any, said: str) -> dict[str, Any]:
    """``arguments`` without the optional numbers (limits, offsets, caps) and optional choices (a value of an
    enumeration: a profile, a policy) whose value the user's words do not contain: each has a default. The
    grammar never offers the numbers (``grammar_parameters``); in its own calls the 0.5B model filled every
    one it read ("limit": 1 on a read returned the file's first line) and gave a helper the profile
    "secretary", whose model was not there."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(props, dict):
        return arguments
    needed = required_somewhere(parameters)
    numbers = set(re.findall(r"\d+", said))
    words = said.lower()

    def unsaid(name: str, value: Any) -> bool:
        prop = props.get(name)
        if name in needed or not isinstance(prop, dict):
            return False
        if prop.get("type") in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool):
            return str(value).removesuffix(".0") not in numbers
        if isinstance(prop.get("enum"), list) and value in prop["enum"] and isinstance(value, str):
            return value.lower() not in words  # one not offered is left to validation (the grammar's choice)
        return False

    return {name: value for name, value in arguments.items() if not unsaid(name, value)}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDecision:
    """A constrained call (validated), or ``problem`` when it could not be used (no call: answer instead)."""

    call: ToolCallRequest | None = None
    problem: str | None = None

    @property
    def answer(self) -> bool:
        return self.call is None and self.problem is None


def parse_decision(text: str, schemas: list[dict[str, Any]], said: str = "", steering: Sequence[str] = ()) -> StepDecision:
    """The decision in ``text``, its arguments validated against the tool's full parameter schema (and
    not copying the tools' descriptions or the loop's ``steering``, unless the user ``said`` those words)."""
    try:
        value = json.loads(text)
    except RecursionError:
        return StepDecision(problem=f"the decision was nested too deep to read: {text[:200]!r}")
    except ValueError as exc:
        return StepDecision(problem=f"the decision was not valid JSON ({exc}): {text[:200]!r}")
    if not isinstance(value, dict) or not isinstance(value.get("tool"), str):
        return StepDecision(problem=f'a call needs "tool" and "arguments", got {text[:200]!r}')
    by_name = {str((s.get("function") or {}).get("name")): s for s in schemas}
    name = value.get("tool")
    if name == NO_TOOL and name not in by_name:
        return StepDecision()  # no tool: an answer (offered only where the schema had the choice)
    if not isinstance(name, str) or name not in by_name:
        return StepDecision(problem=f"there is no tool {name!r}; the tools are {', '.join(by_name)}")
    arguments = value.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return StepDecision(problem=f"the arguments of {name} must be a JSON object, got {json.dumps(arguments)[:200]}")
    call = ToolCallRequest(id=new_call_id(), name=name, arguments=arguments)
    function = by_name[name].get("function") or {}
    problem = argument_problem(arguments, function.get("parameters"), descriptions(schemas, steering), said)
    if problem:
        return StepDecision(call=call, problem=f"the arguments of {name} are not valid: {problem}")
    return StepDecision(call=call)


def descriptions(schemas: Sequence[dict[str, Any]], steering: Sequence[str] = ()) -> str:
    """The offered tools' descriptions, one per line, and ``steering`` (the loop's own instructions to the
    model): what an argument must not copy."""
    return "\n".join([*(str((s.get("function") or {}).get("description") or "") for s in schemas), *steering])


def argument_problem(arguments: dict[str, Any], parameters: Any, description: str = "", said: str = "") -> str | None:
    """The first way ``arguments`` break the tool's parameter schema, or None. ``description``: the
    tool's own, or every offered tool's (``descriptions``), which an argument must not copy either,
    unless the user ``said`` those words too."""
    if not isinstance(parameters, dict):
        return None
    try:
        error = next(iter(Draft202012Validator(parameters).iter_errors(arguments)), None)
    except SchemaError:  # a tool with a broken schema: its own validation will speak
        return None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message}"
    return _copied_description(arguments, parameters, description, said)


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


# A text this long is the model's own composition (a file's content, code): its words are not judged.
_COMPOSED_WORDS = 40


def _copied_description(arguments: dict[str, Any], parameters: dict[str, Any], tool: str = "",
                        said: str = "") -> str | None:
    """A text argument that repeats the schema's own description of a parameter, or of the tool, is no
    value: a small model copies what it read last ("your self-instruction, written as a todo naming
    tools, files or urls" as a reminder's instruction; the 0.5B also gave schedule_recall's "Set a
    reminder or schedule future work for yourself, once or repeating" as one). Six words or more in a
    row from a description (an example a description gives, like 'tomorrow at 09:00', is shorter and
    stays a value)."""
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return None
    described = [_words(str(p.get("description") or "")) for p in props.values() if isinstance(p, dict)]
    whole = " " + " | ".join(_words(line) for line in tool.splitlines()) + " "
    texts = [(name, item) for name, value in arguments.items()
             for item in (value if isinstance(value, list) else [value]) if isinstance(item, str)]
    user = f" {_words(said)} "
    for name, value in texts:
        text = _words(value)
        words = text.split()
        if len(words) > _COMPOSED_WORDS:
            continue
        if len(words) >= 6 and any(text in d for d in described) and f" {text} " not in user:
            return (f"{name}: {value[:80]!r} repeats the description of a parameter; write the value itself, "
                    "taken from what the user asked")
        runs = [f" {' '.join(words[i:i + 6])} " for i in range(len(words) - 5)]
        if tool and any(run in whole and run not in user for run in runs):
            return (f"{name}: {value[:80]!r} repeats a tool's description or an instruction you were given; "
                    "write the value itself, taken from what the user asked")
        opening = _REFUSAL_VALUE.match(value)
        if opening and f" {_words(opening.group(0))} " not in user:
            return (f"{name}: {value[:80]!r} is a refusal, not a value; write the value itself, taken from what the "
                    "user asked")
    return None


# A value that opens as an assistant's refusal is no value (the 0.5B saved the fact "atlas: I'm sorry, but I can't
# assist with that." for "keep in mind my server is called atlas"; round 21), unless the user said those words.
_REFUSAL_VALUE = re.compile(r"\s*(?:i'?m sorry|i am sorry|sorry, (?:but )?i|i can(?:no|')t (?:assist|help)|"
                            r"i am (?:unable|not able) to (?:assist|help)|i'?m (?:unable|not able) to (?:assist|help)|"
                            r"as an ai\b)", re.IGNORECASE)


def repair_note(problem: str) -> str:
    """What the model is told after a decision that could not be used (one repair round)."""
    return f"That step could not be used: {problem}. Choose again."


_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


# The model says it will call a tool: "I can call the `filesystem` function", "I'll use the todo tool".
_WILL_CALL = (r"\bI(?:'ll|'d| will| would| can| could| need to| have to| should| must| am going to|'m going to)?"
              r"\s+(?:first\s+)?(?:call|use|invoke|run)\s+(?:the\s+)?")


def described_call(text: str, names: set[str]) -> bool:
    """The reply describes a call instead of making it: it names an offered tool and shows JSON arguments
    ("I would use the `filesystem` function with: ```json {"action": "read", …}```", Qwen 1.5B), or says
    in its own person that it calls one, marked as a name ("To find out how many hours are in a day, I can
    call the `filesystem` function with the action "stat" …", Qwen 1.5B, round 12)."""
    named = [n for n in names if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text)]
    if named and _JSON_OBJECT.search(text):
        return True
    return any(re.search(rf"{_WILL_CALL}(?:`{re.escape(n)}`|\"{re.escape(n)}\"|'{re.escape(n)}'|"
                         rf"{re.escape(n)}\s+(?:function|tool)\b)", text, re.IGNORECASE) for n in named)


def attempted_tools(text: str, calls: Sequence[ToolCallRequest], schemas: Sequence[dict[str, Any]]) -> list[str]:
    """The offered tools (``schemas``) an attempt to call that cannot run as written points at: the tool it
    names, or else the tools of which its arguments are a valid call (each one of the tool's parameters).
    [] when it points nowhere: every tool stays open.

    The model's own attempt is its choice; asked again under a schema of every tool, the 0.5B model chose
    almost blindly (``todo`` for ``{"name": "schedule_recall", "additional_context_message": "Water the
    plants at 6 pm."}``, bench/tool_choice.py). Nothing here reads the request: only the names the model
    wrote and the tools' own parameter names."""
    offered = {str((s.get("function") or {}).get("name")): s for s in schemas}
    attempts = [(c.name, dict(c.arguments)) for c in calls] or _attempts_in(text)
    for name, _arguments in attempts:
        if name in offered:
            return [name]
    if not any(name for name, _arguments in attempts):  # "I would use the `filesystem` function with {…}"
        mentioned = [name for name in offered if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text)]
        if len(mentioned) == 1:
            return mentioned
    # Arguments that are a valid call of an offered tool under another name ("save_fact" with a category, a
    # key and a value): that tool. A loose fit is no sign ({"text": "Hello!"} fits no tool's required fields;
    # forced into user_notes it would store a greeting as a note).
    return [name for name, s in offered.items() if any(_valid_call(arguments, s) for _name, arguments in attempts)]


def _valid_call(arguments: dict[str, Any], schema: dict[str, Any]) -> bool:
    """``arguments`` are a valid call of the tool, each one a parameter of it."""
    parameters = (schema.get("function") or {}).get("parameters")
    known = (parameters or {}).get("properties") if isinstance(parameters, dict) else None
    return (bool(arguments) and isinstance(known, dict) and set(arguments) <= set(known)
            and argument_problem(arguments, parameters) is None)


def _attempts_in(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of the first JSON object in ``text`` that looks like a call, repaired if broken."""
    start = text.find("{")
    if start < 0:
        return []
    try:
        value = json_repair.loads(text[start:])
    except Exception:  # noqa: BLE001 - nothing readable: no attempt to read
        return []
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, dict)), None)
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("function"), dict):  # the OpenAI shape {"type": "function", "function": {...}}
        return _attempts_in(json.dumps(value["function"]))
    name = next((value[k] for k in (*NAME_KEYS, "function") if isinstance(value.get(k), str)), None)
    raw = next((value[k] for k in ARG_KEYS if k in value), None)
    arguments, problem = parse_arguments(name or "", raw)
    if raw is None or problem:  # the arguments beside the name ({"name": "t", "when": …})
        arguments = {k: v for k, v in value.items() if k not in CALL_KEYS and k != "function"}
    return [(name or "", arguments)] if name is not None or arguments else []


def call_messages(messages: list[ChatMessage], *, now: datetime | None = None,
                  tools: Sequence[dict[str, Any]] = (), none: bool = False) -> list[ChatMessage]:
    """The request of a constrained call: the conversation, then the instruction: the offered tools, one
    line each from their own descriptions (what a small model reads last weighs most when it picks one;
    ``none``: and the choice of none), and the time now (UTC), which a call's time arguments count from.
    It comes last and is never stored: the prefix stays cached."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    entries = [f"{f.get('name')}: {first_sentence(str(f.get('description') or ''), 90)}"
               for f in (s.get("function") or {} for s in tools) if f.get("name")]
    menu = "; ".join([*entries, f"{NO_TOOL}: no tool, answer in words"] if none and entries else entries)
    listing = f" The tools: {menu}" if menu else ""
    return [*messages, ChatMessage(role="system", content=f"{CALL}{listing} The time now is {now:%Y-%m-%dT%H:%MZ} "
                                                          f"({now:%A}, UTC).")]


# A sentence ends at . ! or ? before a space, unless the period closes an abbreviation: a dotted one
# ("e.g.", "i.e.", "a.m.") or a short word that is one ("etc.", "vs.", "cf."). Cut there, a tool's
# description lost its example mid-phrase ("Give 'query' as a few words, e.g.").
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_ABBREVIATION = re.compile(r"(?:\b[A-Za-z]\.(?:[A-Za-z]\.)*[A-Za-z]|\b(?:etc|vs|cf|approx|incl|resp|ca|no|nr))$",
                           re.IGNORECASE)


def first_sentence(text: str, limit: int = 200) -> str:
    """The first sentence of ``text``, at most ``limit`` characters."""
    text = (text or "").strip()
    first = text
    for end in _SENTENCE_END.finditer(text):
        if text[end.start()] == "." and _ABBREVIATION.search(text, 0, end.start()):
            continue
        first = text[: end.end()]
        break
    first = first.strip()
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"
