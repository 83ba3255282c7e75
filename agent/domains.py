"""Closed domains in tool parameters: a parameter whose values are really a closed set known only at
run time (the active profiles, the tools of this turn) becomes an ``enum`` in the tool's schema.

A tool marks such a parameter (or an array's ``items``) with ``"x-navi-domain": "<domain>"``;
``close_domains`` fills in ``enum`` from the turn's domains and removes the marker, so neither the
model nor the server ever sees it. The enum is in the definitions the model reads (it sees the
allowed values) and in the grammar of a constrained call (``agent.decide``): the server then cannot
generate a value outside the set (issue 24: the 0.5B model asked for the subagent profile "user").
A domain with no values leaves the parameter open. The domains are the same for every request of
a turn and change only when profiles or tools change, so the prompt prefix stays byte-identical.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

DOMAIN_KEY = "x-navi-domain"
PROFILES = "profiles"  # ids of the active profiles
TOOLS = "tools"  # names of the tools this turn may use


def close_domains(schemas: list[dict[str, Any]], domains: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Copies of the tool definitions with every marked parameter closed to its domain's values."""
    return [_close_tool(s, domains) if _marked(s) else s for s in schemas]


def _marked(value: Any) -> bool:
    if isinstance(value, dict):
        return DOMAIN_KEY in value or any(_marked(v) for v in value.values())
    if isinstance(value, list):
        return any(_marked(v) for v in value)
    return False


def _close_tool(schema: dict[str, Any], domains: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    out = copy.deepcopy(schema)
    function = out.get("function") or {}
    if isinstance(function.get("parameters"), dict):
        _close(function["parameters"], domains)
    return out


def _close(node: Any, domains: Mapping[str, Sequence[str]]) -> None:
    if isinstance(node, list):
        for item in node:
            _close(item, domains)
        return
    if not isinstance(node, dict):
        return
    domain = node.pop(DOMAIN_KEY, None)
    if isinstance(domain, str):
        values = list(dict.fromkeys(str(v) for v in domains.get(domain) or ()))
        if values:
            node["enum"] = values
    for value in node.values():
        _close(value, domains)
