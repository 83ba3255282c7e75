"""A prompt a CPU can afford: which tools go into the prompt, in what form, and which wait.

Every request of a turn carries the system prompt and the tool definitions; on a CPU each
token of them costs time before the first word of a new conversation. A profile's
``prompt_budget_tokens`` bounds that prefix (0: no bound):

1. the tools' definitions as they are, when they fit;
2. else compact definitions (``compact_schema``: first sentence of each description, short
   parameter descriptions), when those fit;
3. else lean definitions (``lean_schema``: compact, and the optional numbers, flags and choices among
   listed values named with their type and values but not described: limits, caps, policies), when
   those fit: every tool stays in the request, where a model sees it, rather than behind
   ``find_tools`` (a small model never looked there: the ``local_small`` profile's todo and helper
   tools were out of sight by 70 tokens);
4. else lean definitions of the tools in the profile's order while they fit, and the rest
   *on demand*: named, with one line each, in the description of ``find_tools``, which gives a
   model their full definitions. A model that calls tools natively gets the tools it loaded that
   way in its tool list from then on (derived from the session's history, so the list is the
   same for every later request). In constrained mode (``agent.decide``) every tool is in the
   grammar anyway: the menu shows the deferred ones by name and line, and the model can pick
   them directly.

The plan is a pure function of the tools offered, the profile and what the history loaded:
the prompt prefix is byte-identical across the requests and turns of a session, so a model
server's prompt cache keeps it (tools_app's ``find_tools`` is the tool; this module only plans).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.decide import first_sentence, required_somewhere, without_grammar_patterns
from agent.llm.base import ChatMessage

FIND_TOOLS = "find_tools"
CHARS_PER_TOKEN = 3.5  # conservative for JSON (measured: Qwen2.5's tokenizer gives ~3.6-4 on our schemas)
PARAM_DESCRIPTION_CHARS = 80


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def schema_tokens(schemas: Iterable[dict[str, Any]]) -> int:
    return sum(estimate_tokens(json.dumps(s, ensure_ascii=False)) for s in schemas)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPlan:
    """The tools of one request: definitions sent whole, and names left on demand."""

    schemas: list[dict[str, Any]]  # definitions for the request (compact or not), find_tools included
    every: list[dict[str, Any]]  # full definitions of every offered tool (for the grammar and validation)
    deferred: list[str] = field(default_factory=list)  # offered on demand, by name
    compact: bool = False

    @property
    def names(self) -> list[str]:
        """The tools whose definitions this request carries."""
        return [str(s["function"]["name"]) for s in self.schemas]

    @property
    def callable(self) -> set[str]:
        """Every tool a call may name: the offered ones (loaded or not) and find_tools."""
        return {*self.names, *(str(s["function"]["name"]) for s in self.every)}

    def parameters(self, name: str) -> Any:
        """The full parameter schema of tool ``name`` (None: unknown)."""
        return self._function(name).get("parameters")

    def description(self, name: str) -> str:
        """The full description of tool ``name`` ("" when unknown)."""
        return str(self._function(name).get("description") or "")

    def _function(self, name: str) -> dict[str, Any]:
        for schema in [*self.every, *self.schemas]:
            if schema["function"]["name"] == name:
                return dict(schema["function"])
        return {}


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The definition with the first sentence of its description and short parameter descriptions; no
    conditions between fields (allOf): the grammar and validation enforce those."""
    function = dict(schema.get("function") or {})
    function["description"] = first_sentence(str(function.get("description") or ""))
    function["parameters"] = _compact_parameters(function.get("parameters"))
    return {**schema, "function": function}


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``compact_schema``, and the optional parameters whose type or values say what they are (numbers,
    flags, a choice among listed values: limits, caps, policies; no call requires them, by itself or in a
    case of ``allOf``) keep their name, type and values but lose their description. A path's, a format's
    or a text's description stays."""
    compact = compact_schema(schema)
    function = dict(compact["function"])
    parameters = function.get("parameters")
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict):
        return compact
    needed = required_somewhere((schema.get("function") or {}).get("parameters"))
    function["parameters"] = {**parameters, "properties": {
        name: {k: v for k, v in prop.items() if k != "description"} if name not in needed and _self_explained(prop)
        else prop for name, prop in parameters["properties"].items()}}
    return {**compact, "function": function}


def _self_explained(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    items = prop.get("items")
    items = items if isinstance(items, dict) else {}
    return (prop.get("type") in ("integer", "number", "boolean") or isinstance(prop.get("enum"), list)
            or isinstance(items.get("enum"), list))


def _compact_parameters(parameters: Any) -> Any:
    if not isinstance(parameters, dict):
        return parameters
    out = {k: v for k, v in parameters.items() if k not in ("examples", "$schema", "title", "allOf")}
    if isinstance(out.get("description"), str):
        out["description"] = first_sentence(out["description"], PARAM_DESCRIPTION_CHARS)
        if not out["description"]:
            del out["description"]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: _compact_parameters(prop) for name, prop in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _compact_parameters(out["items"])
    return out


def plan_tools(schemas: list[dict[str, Any]], *, budget: int, fixed_tokens: int, loaded: Iterable[str] = (),
               finder: dict[str, Any] | None = None) -> ToolPlan:
    """Which of ``schemas`` (the offered tools, in the profile's order) go into the request.

    ``fixed_tokens``: the rest of the prompt (persona, profile prompt); ``finder``: the
    ``find_tools`` definition, needed when some tools must wait; ``loaded``: tools a
    ``find_tools`` call of this session already loaded (sent after the others, in the same form)."""
    finder_name = (finder or {}).get("function", {}).get("name")
    every = [s for s in schemas if s["function"]["name"] != finder_name]  # for the grammar: patterns kept
    readable = without_grammar_patterns(schemas)  # what the model reads
    offered = [s for s in readable if s["function"]["name"] != finder_name]
    room = budget - fixed_tokens
    if budget <= 0 or schema_tokens(offered) <= room:
        return ToolPlan(schemas=readable, every=every)
    compact = [compact_schema(s) for s in offered]
    if schema_tokens(compact) <= room:
        return ToolPlan(schemas=compact, every=every, compact=True)
    compact = [lean_schema(s) for s in offered]
    if schema_tokens(compact) <= room or finder is None:
        return ToolPlan(schemas=compact, every=every, compact=True)
    kept: list[dict[str, Any]] = []
    deferred: list[dict[str, Any]] = []
    used = schema_tokens([finder]) + estimate_tokens(" ".join(
        f"{s['function']['name']}: {first_sentence(s['function'].get('description', ''), 90)};" for s in compact))
    for schema in compact:
        cost = schema_tokens([schema])
        if not deferred and used + cost <= room:
            kept.append(schema)
            used += cost
        else:
            deferred.append(schema)
            used -= estimate_tokens(f"{schema['function']['name']}: "
                                    f"{first_sentence(schema['function'].get('description', ''), 90)};")
    wanted = set(loaded)
    later = [s for s in deferred if s["function"]["name"] in wanted]
    waiting = [s for s in deferred if s["function"]["name"] not in wanted]
    if not waiting:
        return ToolPlan(schemas=kept + later, every=every, compact=True)
    return ToolPlan(schemas=[*kept, finder_with_list(finder, waiting), *later], every=every,
                    deferred=[s["function"]["name"] for s in waiting], compact=True)


def finder_with_list(finder: dict[str, Any], waiting: list[dict[str, Any]]) -> dict[str, Any]:
    """``find_tools`` whose description names the tools it can load, one line each."""
    function = dict(finder.get("function") or {})
    listing = "; ".join(f"{s['function']['name']}: {first_sentence(s['function'].get('description', ''), 90)}"
                        for s in waiting)
    function["description"] = f"{first_sentence(str(function.get('description') or ''))} Tools to load: {listing}"
    return {**finder, "function": function}


def loaded_tools(history: Iterable[ChatMessage]) -> list[str]:
    """Tools that ``find_tools`` calls in ``history`` loaded, in the order they were loaded."""
    out: list[str] = []
    for message in history:
        if message.role == "tool" and message.name == FIND_TOOLS:
            for name in message.metadata.get("loaded_tools") or []:
                if isinstance(name, str) and name not in out:
                    out.append(name)
    return out
