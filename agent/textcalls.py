"""Tool calls that small local models write as JSON text instead of ``tool_calls``.

``extract_text_tool_calls(text, known_tools)`` is a pure function. It accepts:

- a bare object ``{"name": "t", "arguments": {...}}``; ``"parameters"``, ``"args"``
  or ``"input"`` instead of ``"arguments"``; ``"tool"`` / ``"tool_name"`` instead of
  ``"name"``; the OpenAI shape ``{"type": "function", "function": {...}}``;
  arguments given as a JSON string;
- a list of such objects;
- the same inside a ```json / ```tool_call / plain ``` fence, or inside
  ``<tool_call>...</tool_call>`` tags (Hermes/Qwen templates);
- with a little prose around it ("I'll check the time. {...}").

The heuristic is conservative — a false call is worse than a missed one
(the repair prompt and the model's next turn recover a missed call, but a
false call runs a tool the user never asked for). Text is treated as a call
only when ALL of these hold:

1. the object has only call-like keys (name/tool, arguments/parameters/args/
   input, id, type) — any other key means it is data;
2. the prose outside the call JSON is short: at most 400 characters and two
   paragraphs before it, 200 characters and one paragraph after it, 200
   characters between two calls;
3. that prose has no sign of an explanation, an example or a requested
   answer ("example", "e.g.", "for instance", "such as", "looks like",
   "format", "schema", "syntax", "you can/could/should ...", "here is the
   JSON/object/result ...");
4. there is no other code fence in the text (a ```python block next to the
   JSON means an explanation, not a call);
5. the name is in ``known_tools``. A call-shaped object with another
   identifier-like name, or words as a name beside an ``"arguments"`` object
   (``{"name": "file shopping.txt", "arguments": {...}}``), sets
   ``unknown_tool`` instead (no call), so the agent can tell the model which
   tools exist.

Next to a recognised call, an object that names a known tool and has arguments but
also keys a call does not have (the model's junk) is neither run nor shown, and
does not count as prose around the call. With ``extra_keys_alone`` (the aids, for a
model known to write its calls as text, when the user did not ask for JSON) such an
object that is the whole reply is the call, its other keys dropped (the model added
the result it imagined); otherwise it is data.

A call that only lacks its final closing brace(s) at the very end of the text (a
habit of Qwen2.5-Coder 0.5B) is completed and treated like a well-formed one; a
call cut off inside a string or after a comma is not. A finished call (it ends with
``}``) with a quote or bracket wrong is repaired with ``json_repair`` when the repair
gives a call (Qwen 0.5B left out the closing quote of a string that held single quotes).

``malformed`` is set when, under the same conditions, the text plainly starts
a call of a known tool (``{"name": "known_tool", ...``) but the JSON does not
parse; it describes the problem for a repair prompt. ``remaining_text`` is the
text without the JSON (and fences/tags) of the calls returned in ``calls``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

from agent.llm.base import ToolCallRequest
from agent.llm.http_common import new_call_id, parse_arguments

MAX_TEXT = 200_000
MAX_BEFORE, MAX_BEFORE_PARAGRAPHS = 400, 2
MAX_AFTER, MAX_AFTER_PARAGRAPHS = 200, 1
MAX_BETWEEN = 200
# A small model in a loop writes the same call dozens of times in one reply (observed:
# Qwen2.5-Coder 0.5B, 40 identical get_current_datetime calls): identical calls count
# once, and at most MAX_CALLS are taken from one reply.
MAX_CALLS = 4

NAME_KEYS = ("name", "tool", "tool_name")
ARG_KEYS = ("arguments", "parameters", "args", "input")
CALL_KEYS = frozenset({*NAME_KEYS, *ARG_KEYS, "id", "type"})
CALL_FENCE_LANGS = frozenset({"", "json", "json5", "tool_call", "tool_code", "tool"})

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL | re.IGNORECASE)
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.\-]{0,63}$")
# A call's name as a small model writes it: an identifier, or the user's words ("file shopping.txt", "note
# down": the 0.5B, round 20 and issue 24); with only a call's keys and its arguments, still a call (of no tool).
_CALL_NAME = re.compile(r"^[A-Za-z_][\w.\- ]{0,63}$")
# Used with .match(): anchored at the start of a block / at the scan position.
_ATTEMPT = re.compile(r'[\[\s]*\{\s*"(?:name|tool|tool_name)"\s*:\s*"([^"]{1,64})"')
_NAME_KEY = re.compile(r'"(?:name|tool|tool_name)"\s*:')
# Keys a model adds to a call for the result it imagined (accepted only with extra_keys_alone).
RESULT_KEYS = frozenset({"content", "result", "output", "response", "answer"})
_PARAGRAPH = re.compile(r"\n\s*\n")
_EXPLANATION = re.compile(
    r"(?i)\b(?:for example|examples?|for instance|such as|sample|would look like|looks? like|here is how"
    r"|here's how|format|schema|syntax|template|you (?:can|could|would|should|might|may)"
    r"|here(?: is|'s) (?:the|a|an|your|some) (?:json|object|output|result|answer|response|data))\b|\be\.g\."
)
_BLANKS = re.compile(r"\n{3,}")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True, kw_only=True)
class TextCallResult:
    calls: list[ToolCallRequest] = field(default_factory=list)
    malformed: str | None = None
    unknown_tool: str | None = None
    remaining_text: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Block:
    """A piece of the text that may be a call: a fence, a tag, or bare JSON."""

    start: int
    end: int
    value: Any = None
    parsed: bool = False
    error: str | None = None
    is_fence: bool = False


def extract_text_tool_calls(text: str, known_tools: set[str], *, extra_keys_alone: bool = False) -> TextCallResult:
    """Recognise tool calls written as JSON in ``text`` (see the module docstring)."""
    nothing = TextCallResult(remaining_text=text)
    if not known_tools or "{" not in text or len(text) > MAX_TEXT:
        return nothing
    blocks, other_code = _find_blocks(text)
    shaped: list[tuple[_Block, list[tuple[str, Any]]]] = []
    attempts: list[tuple[_Block, str]] = []
    for block in blocks:
        shapes = _call_shapes(block.value) if block.parsed else None
        if shapes:
            shaped.append((block, shapes))
        elif not block.parsed and (name := _attempted_name(text, block, known_tools)):
            attempts.append((block, name))
    # Next to a real call, an object naming a known tool with extra keys is the model's junk, not an
    # answer: it does not count as prose around the call and is dropped from the text (never run).
    if (extra_keys_alone and not shaped and len(blocks) == 1 and _alone(text, blocks[0])
            and _near_call(blocks[0].value, known_tools) and set(blocks[0].value) - CALL_KEYS <= RESULT_KEYS):
        # The whole reply is one call of a known tool with a key of the model's own, e.g. the result
        # it imagined (Qwen 0.5B: {"name": "filesystem", "arguments": {...}, "content": "42"}).
        call = {k: v for k, v in blocks[0].value.items() if k in CALL_KEYS}
        shaped.append((blocks[0], _call_shapes(call) or []))
    junk = [b for b in blocks if b.parsed and not _call_shapes(b.value) and _near_call(b.value, known_tools)]
    has_call = any(name in known_tools for _, shapes in shaped for name, _ in shapes)
    junk = junk if has_call else []
    involved = sorted([b for b, _ in shaped] + [b for b, _ in attempts] + junk, key=lambda b: b.start)
    if not involved or other_code or not _call_context(text, involved):
        return nothing
    return _result(text, shaped, attempts, known_tools, junk)


def _result(
    text: str,
    shaped: list[tuple[_Block, list[tuple[str, Any]]]],
    attempts: list[tuple[_Block, str]],
    known_tools: set[str],
    junk: list[_Block],
) -> TextCallResult:
    calls: list[ToolCallRequest] = []
    unknown: str | None = None
    consumed: list[_Block] = list(junk)
    seen: set[str] = set()
    for block, shapes in shaped:
        known = [(name, args) for name, args in shapes if name in known_tools]
        # A bare {"name": "x"} is too weak a signal to tell the model "no such tool".
        unknown = unknown or next((n for n, a in shapes if n not in known_tools and a is not None), None)
        if known:
            consumed.append(block)
            for name, args in known:
                key = json.dumps([name, args], sort_keys=True, default=str)
                if key not in seen and len(calls) < MAX_CALLS:
                    seen.add(key)
                    calls.append(_request(name, args))
    malformed = None
    if not calls and attempts:
        block, name = attempts[0]
        malformed = _describe(text[block.start : block.end], name, block.error)
    remaining = _remove(text, consumed) if consumed else text
    if consumed and not remaining.strip("}] \n"):
        remaining = ""  # a stray closing brace after the call is not text for the user
    return TextCallResult(calls=calls, malformed=malformed, unknown_tool=unknown, remaining_text=remaining)


def _request(name: str, raw_args: Any) -> ToolCallRequest:
    arguments, problem = parse_arguments(name, raw_args)
    return ToolCallRequest(id=new_call_id(), name=name, arguments=arguments, arguments_error=problem)


# -- finding candidate blocks -------------------------------------------------------------


def _find_blocks(text: str) -> tuple[list[_Block], bool]:
    """Fences, tags and bare JSON values; and whether some other code fence exists."""
    blocks: list[_Block] = []
    taken: list[tuple[int, int]] = []
    other_code = False
    for match in _FENCE.finditer(text):
        taken.append(match.span())
        lang = match.group(1).lower()
        body = match.group(2).strip()
        block = _parse_block(body, match.start(), match.end(), is_fence=True)
        if lang not in CALL_FENCE_LANGS or not (block.parsed and _call_shapes(block.value)):
            other_code = other_code or not _looks_like_attempt(body)
        if lang in CALL_FENCE_LANGS:
            blocks.append(block)
    for match in _TAG.finditer(text):
        if not _inside(match.start(), taken):
            taken.append(match.span())
            blocks.append(_parse_block(match.group(1).strip(), match.start(), match.end()))
    blocks += _bare_values(text, taken)
    return sorted(blocks, key=lambda b: b.start), other_code


def _parse_block(body: str, start: int, end: int, *, is_fence: bool = False) -> _Block:
    try:
        return _Block(start=start, end=end, value=json.loads(body), parsed=True, is_fence=is_fence)
    except RecursionError:
        return _Block(start=start, end=end, error="nested too deep to read", is_fence=is_fence)
    except ValueError as exc:
        completed = _with_missing_closers(body) or _repaired(body) if _ATTEMPT.match(body) else None
        if completed is not None:
            return _Block(start=start, end=end, value=completed, parsed=True, is_fence=is_fence)
        return _Block(start=start, end=end, error=_json_problem(body, exc), is_fence=is_fence)


def _with_missing_closers(fragment: str) -> Any:
    """The value of a call attempt that only lacks its final ``}``/``]`` (Qwen2.5 0.5B often
    stops one brace short: ``{"name": "t", "arguments": {"a": 1}``), else None.

    Only closers are added, and only when the fragment ends outside a string after a
    complete value: a call cut off inside an argument is never completed."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in fragment:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
    tail = fragment.rstrip()
    if in_string or not stack or not tail or tail[-1] in ",:{[":
        return None
    try:
        return json.loads(tail + "".join(reversed(stack)))
    except (ValueError, RecursionError):
        return None


def _repaired(fragment: str) -> Any:
    """The call in a broken call attempt, repaired by ``json_repair`` (a string whose closing quote
    Qwen 0.5B left out: ``["a", "note 'b']``), when the repair gives a call; else None. Only a
    finished attempt (ending in ``}``) is repaired: a call cut off mid-way is never completed."""
    if not fragment.rstrip().endswith("}") or len(_NAME_KEY.findall(fragment)) != 1:
        return None  # cut off, or several calls: a repair must never pick a later one
    try:
        value = json_repair.loads(fragment)
    except Exception:  # noqa: BLE001 - a repair that fails leaves the attempt malformed
        return None
    return value if _call_shapes(value) else None


def _bare_values(text: str, taken: list[tuple[int, int]]) -> list[_Block]:
    """JSON objects/lists outside fences and tags; a broken call attempt runs to the last brace."""
    blocks: list[_Block] = []
    i = 0
    while i < len(text):
        i = _next_opening(text, i)
        if i < 0:
            break
        if _inside(i, taken):
            i += 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, i)
        except RecursionError:
            break  # nested deeper than Python parses (thousands of levels): no call, and the rest is text
        except ValueError as exc:
            if _ATTEMPT.match(text, i):
                completed = _with_missing_closers(text[i:])
                if completed is not None:  # the call runs to the end of the text, one brace short
                    blocks.append(_Block(start=i, end=len(text), value=completed, parsed=True))
                    break
                end = max(text.rfind("}"), text.rfind("]")) + 1
                if end <= i:  # truncated: no closing bracket at all
                    end = len(text)
                repaired = _repaired(text[i:end])
                if repaired is not None:
                    blocks.append(_Block(start=i, end=end, value=repaired, parsed=True))
                    break
                blocks.append(_Block(start=i, end=max(end, i + 1), error=_json_problem(text[i:end], exc)))
                break
            i += 1
            continue
        blocks.append(_Block(start=i, end=end, value=value, parsed=True))
        i = end
    return blocks


def _next_opening(text: str, start: int) -> int:
    """The next ``{``, or ``[`` directly followed by ``{`` (not a markdown link)."""
    for i in range(start, len(text)):
        if text[i] == "{" or (text[i] == "[" and text[i + 1 : i + 40].lstrip().startswith("{")):
            return i
    return -1


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


# -- shapes --------------------------------------------------------------------------------


def _call_shapes(value: Any) -> list[tuple[str, Any]] | None:
    """[(name, raw_arguments)] when ``value`` is a call or a list of calls, else None."""
    items = value if isinstance(value, list) else [value]
    shapes = [_call_shape(item) for item in items]
    if not shapes or any(shape is None for shape in shapes):
        return None
    return [shape for shape in shapes if shape is not None]


def _call_shape(obj: Any) -> tuple[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict) and set(obj) <= {"function", "type", "id", "index"}:
        return _call_shape(obj["function"])
    if not set(obj) <= CALL_KEYS:
        return None
    names = [obj[k] for k in NAME_KEYS if k in obj]
    args = [obj[k] for k in ARG_KEYS if k in obj]
    if len(names) != 1 or len(args) > 1 or not isinstance(names[0], str) or not _CALL_NAME.match(names[0]):
        return None
    if not _IDENTIFIER.match(names[0]) and not isinstance(obj.get("arguments"), dict):
        # Words as a name count only beside an "arguments" object, the key chat templates give a call: data a
        # user asked for ({"name": "Linear Regression", "parameters": {…}}) stays data.
        return None
    if "type" in obj and obj["type"] not in ("function", "tool_call", "tool"):
        return None
    if not args:
        return names[0], None
    if not isinstance(args[0], dict | str):
        return names[0], json.dumps(args[0])  # parse_arguments reports "must be an object"
    return names[0], args[0]


def _alone(text: str, block: _Block) -> bool:
    """``block`` is all there is of ``text`` (a fence or tag around it included)."""
    return block.parsed and not text[: block.start].strip() and not text[block.end :].strip()


def _near_call(value: Any, known_tools: set[str]) -> bool:
    """An object with a known tool's name and arguments plus keys a call does not have
    (Qwen2.5-Coder 0.5B writes ``{"name": "todo", "arguments": [...], "validation": ...}``)."""
    if not isinstance(value, dict):
        return False
    names = [value[k] for k in NAME_KEYS if k in value]
    return (len(names) == 1 and isinstance(names[0], str) and names[0] in known_tools and any(k in value for k in ARG_KEYS)
            and not set(value) <= CALL_KEYS)


def _attempted_name(text: str, block: _Block, known_tools: set[str]) -> str | None:
    match = _ATTEMPT.match(_block_body(text, block))
    return match.group(1) if match and match.group(1) in known_tools else None


def _looks_like_attempt(body: str) -> bool:
    return bool(_ATTEMPT.match(body))


def _block_body(text: str, block: _Block) -> str:
    raw = text[block.start : block.end]
    if block.is_fence:
        raw = raw.split("\n", 1)[1] if "\n" in raw else ""
        raw = raw.rsplit("```", 1)[0]
    elif raw.lower().startswith("<tool_call>"):
        raw = raw[len("<tool_call>") :]
    return raw.strip()


# -- the surrounding prose -------------------------------------------------------------------


def _call_context(text: str, blocks: list[_Block]) -> bool:
    """Whether the prose around ``blocks`` is short and not an explanation (rules 2-3)."""
    before = text[: blocks[0].start]
    after = text[blocks[-1].end :]
    between = [text[a.end : b.start] for a, b in zip(blocks, blocks[1:], strict=False)]
    if not _short(before, MAX_BEFORE, MAX_BEFORE_PARAGRAPHS) or not _short(after, MAX_AFTER, MAX_AFTER_PARAGRAPHS):
        return False
    if any(len(part.strip()) > MAX_BETWEEN for part in between):
        return False
    return not any(_EXPLANATION.search(part) for part in (before, after, *between))


def _short(prose: str, max_chars: int, max_paragraphs: int) -> bool:
    stripped = prose.strip()
    paragraphs = [p for p in _PARAGRAPH.split(stripped) if p.strip()]
    return len(stripped) <= max_chars and len(paragraphs) <= max_paragraphs


def _remove(text: str, blocks: list[_Block]) -> str:
    parts: list[str] = []
    cursor = 0
    for block in sorted(blocks, key=lambda b: b.start):
        parts.append(text[cursor : block.start])
        cursor = block.end
    parts.append(text[cursor:])
    return _BLANKS.sub("\n\n", "".join(parts)).strip()


# -- describing broken JSON ------------------------------------------------------------------


def _json_problem(body: str, exc: ValueError) -> str:
    opened, closed = body.count("{"), body.count("}")
    if opened != closed:
        return f"unbalanced braces ({opened} '{{' but {closed} '}}')"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _describe(snippet: str, name: str, problem: str | None) -> str:
    return (
        f"Your call of the tool '{name}' is not valid JSON ({problem or 'it could not be parsed'}): "
        f"{snippet.strip()[:300]}\nWrite the call again as one JSON object, for example "
        f'{{"name": "{name}", "arguments": {{...}}}}, or use the tool-calling interface.'
    )
