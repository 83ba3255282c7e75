"""The approval policy: is a tool call ``allow``, ``ask`` or ``deny``, and why (pure; no I/O).

Built-in defaults (an admin overrides them per profile with ``ToolRule`` rows):

| call | class |
|---|---|
| terminal, code_exec, ssh_exec, write_tool, reload_tools | ask |
| filesystem write / append / move / delete outside the session's directory | ask |
| http_request with a method other than GET / HEAD | ask |
| MCP tools (``mcp__<server>__<tool>``) | ask |
| session_search and the other read-only tools | allow |
| everything else | allow |

An admin's rules: the most specific matching ``ToolRule`` decides (this profile before every
profile, an exact tool name before a glob, a rule for the call's action before one for any
action). A call whose main argument matches one of that rule's ``allow_patterns`` is allowed.

**The exfiltration guard.** Once the turn took in untrusted content (``CallCheck.tainted_by``),
a call that can send data out or act on the machine needs approval even when the profile would
allow it: http_request / web_view to a host not fetched in this turn or carrying query/body data,
ssh_exec, terminal, code_exec, write_tool, schedule_recall and MCP tools. The card then names the
content that tainted the turn. A "deny" rule still denies; an earlier "approve for this session"
grant does not skip the guard (the user approved the call in another context).
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.gate import CallCheck, host_of

ASK_TOOLS = frozenset({"terminal", "code_exec", "ssh_exec", "write_tool", "reload_tools"})
# Read-only tools over the user's own data: allowed whatever the turn read before.
READ_ONLY_TOOLS = frozenset({"session_search"})
FS_WRITE_ACTIONS = frozenset({"write", "append", "move", "delete"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
GUARDED_TOOLS = frozenset({"ssh_exec", "terminal", "code_exec", "write_tool", "schedule_recall"})
FETCH_TOOLS = frozenset({"http_request", "web_view"})
# The argument an admin's allow_patterns are matched against.
SUBJECT_ARG = {"terminal": "command", "ssh_exec": "command", "code_exec": "code", "http_request": "url",
               "web_view": "url", "filesystem": "path", "write_tool": "name"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleView:
    profile_id: str | None
    tool: str
    action: str
    decision: str
    allow_patterns: tuple[str, ...] = ()

    def matches(self, tool: str, action: str) -> bool:
        if self.action and self.action.lower() != action.lower():
            return False
        return self.tool == tool or fnmatch.fnmatchcase(tool, self.tool)

    def specificity(self, profile_id: str) -> tuple[int, int, int]:
        return (self.profile_id == profile_id, not _is_glob(self.tool), bool(self.action))


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """``audited``: a run of an ask-class call (or one the guard asked about) goes into the audit log."""

    decision: str
    reason: str = ""
    touches: str = ""
    tainted_by: tuple[str, ...] = ()
    audited: bool = False
    via: str = "default"  # default | rule | pattern | guard


def is_mcp(tool: str) -> bool:
    return tool.startswith("mcp__")


def action_of(tool: str, args: dict[str, Any]) -> str:
    if tool == "filesystem":
        return str(args.get("action") or "").lower()
    if tool == "http_request":
        return str(args.get("method") or "GET").upper()
    return ""


def subject_of(tool: str, args: dict[str, Any]) -> str:
    key = SUBJECT_ARG.get(tool)
    if key is not None:
        return str(args.get(key) or "")
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def _short(text: str, limit: int = 160) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def inside(path: str, root: Path | None) -> bool:
    """Whether ``path`` (relative = inside ``root``) resolves inside ``root`` (symlinks followed)."""
    if root is None:
        return False
    raw = os.path.expanduser(path or ".")
    full = raw if os.path.isabs(raw) else os.path.join(root, raw)
    real = Path(os.path.realpath(full))
    real_root = Path(os.path.realpath(root))
    return real == real_root or real_root in real.parents


def base_class(tool: str, args: dict[str, Any], session_dir: Path | None) -> tuple[str, str, str]:
    """(allow|ask, reason, what it touches) by the built-in defaults."""
    if tool in READ_ONLY_TOOLS:
        return "allow", "", ""
    if tool == "terminal":
        return "ask", "runs a program on the Navi server", f"`{_short(args.get('command', ''))}`"
    if tool == "code_exec":
        code = str(args.get("code") or "")
        lines = code.count("\n") + 1 if code else 0
        return "ask", "runs Python code on the Navi server", f"{lines} line(s) of Python: `{_short(code, 100)}`"
    if tool == "ssh_exec":
        return ("ask", f"runs a shell command on the SSH host {args.get('host', '?')!r}",
                f"`{_short(args.get('command', ''))}` on {args.get('host', '?')}")
    if tool == "write_tool":
        return "ask", "installs new tool code that Navi can run from now on", f"tool {args.get('name', '?')!r}"
    if tool == "reload_tools":
        return "ask", "reloads the tools directory (changed tool code starts to run)", "the user tools"
    if tool == "filesystem":
        action = action_of(tool, args)
        if action in FS_WRITE_ACTIONS:
            paths = [str(args.get("path") or "")] + ([str(args.get("destination") or "")] if action == "move" else [])
            outside = [p for p in paths if not inside(p, session_dir)]
            if outside:
                return ("ask", f"{action}s a file outside this conversation's own directory",
                        ", ".join(_short(p, 120) for p in outside))
        return "allow", "", ""
    if tool == "http_request":
        method = action_of(tool, args)
        if method not in SAFE_METHODS:
            return ("ask", f"sends a {method} request (it can change data or send data out)",
                    f"{method} {_short(args.get('url', ''), 200)}")
        return "allow", "", ""
    if is_mcp(tool):
        parts = tool.split("__")
        server = parts[1] if len(parts) > 2 else "?"
        return "ask", f"calls a tool of the MCP server {server!r} (a third-party program)", tool
    return "allow", "", ""


def _has_data(tool: str, args: dict[str, Any]) -> bool:
    url = str(args.get("url") or "")
    try:
        query = urlsplit(url).query
    except ValueError:
        query = ""
    if query:
        return True
    if tool == "http_request":
        return bool(args.get("params") or args.get("body")) or "json" in args
    return False


def guard_reason(check: CallCheck) -> str | None:
    """Why the turn's taint makes this call need approval, or None."""
    if not check.tainted_by:
        return None
    tool, args = check.tool, check.args
    if tool in GUARDED_TOOLS or is_mcp(tool):
        return "it can act on the machine or send data out"
    if tool in FETCH_TOOLS:
        host = host_of(str(args.get("url") or ""))
        if _has_data(tool, args):
            return f"it sends data out to {host or 'a web address'} (query or body)"
        if host and host not in check.fetched_hosts:
            return f"it reaches {host}, a host this turn has not fetched yet (the address itself can carry data)"
        if not host:
            return "it reaches a web address"
    return None


def best_rule(rules: list[RuleView], *, profile_id: str, tool: str, action: str) -> RuleView | None:
    candidates = [r for r in rules if r.profile_id in (None, profile_id) and r.matches(tool, action)]
    if not candidates:
        return None
    return max(candidates, key=lambda r: r.specificity(profile_id))


def tainted_note(labels: tuple[str, ...]) -> str:
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return f"this turn read {shown}"


def classify(check: CallCheck, rules: list[RuleView], *, session_dir: Path | None) -> Verdict:
    """The verdict for one call: admin rules over the defaults, then the exfiltration guard."""
    base, reason, touches = base_class(check.tool, check.args, session_dir)
    ask_class = base == "ask"
    decision, via = base, "default"
    rule = best_rule(rules, profile_id=check.profile_id, tool=check.tool, action=action_of(check.tool, check.args))
    if rule is not None:
        decision, via = rule.decision, "rule"
        subject = subject_of(check.tool, check.args)
        if any(fnmatch.fnmatchcase(subject, p) for p in rule.allow_patterns):
            decision, via = "allow", "pattern"
    if decision == "deny":
        what = f"{check.tool} ({action_of(check.tool, check.args)})" if action_of(check.tool, check.args) else check.tool
        return Verdict(decision="deny", reason=f"an administrator's rule denies {what} for this profile",
                       touches=touches, audited=True, via=via)
    if decision == "ask" and not reason:
        reason, touches = "an administrator's rule asks before this tool runs", _short(subject_of(check.tool,
                                                                                                  check.args))
    why = guard_reason(check)
    if why is not None:
        if not touches:
            touches = _short(subject_of(check.tool, check.args), 200)
        lead = reason or f"{check.tool} {why}"
        full = f"{lead}; {tainted_note(check.tainted_by)}, and {why}" if reason else \
            f"{tainted_note(check.tainted_by)}, and {check.tool} {why}"
        return Verdict(decision="ask", reason=full, touches=touches, tainted_by=check.tainted_by, audited=True,
                       via="guard" if decision == "allow" else via)
    return Verdict(decision=decision, reason=reason, touches=touches, audited=ask_class or decision == "ask",
                   via=via)


def ask_tools(names: list[str], rules: list[RuleView], *, profile_id: str) -> set[str]:
    """The tools among ``names`` whose calls need approval whatever their arguments (a recall's
    default allowlist leaves them out): ask by default or by a tool-wide rule, without patterns."""
    out: set[str] = set()
    for name in names:
        base, _, _ = base_class(name, {}, None)
        rule = best_rule(rules, profile_id=profile_id, tool=name, action="")
        decision = rule.decision if rule is not None else base
        if rule is not None and rule.action:
            decision = base
        if decision in ("ask", "deny") and not (rule is not None and rule.allow_patterns):
            out.add(name)
    return out
