"""The approval policy, class by class (pure: no database, no server)."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.gate import CallCheck, RunRules
from approvals_app.policy import RuleView, ask_tools, classify


def check(tool: str, args: dict | None = None, *, tainted: tuple[str, ...] = (), hosts: frozenset[str] = frozenset(),
          profile: str = "p", rules: RunRules | None = None) -> CallCheck:
    return CallCheck(tool=tool, args=args or {}, session_id="s", run_id="r", user_id=1, user_role="staff",
                     profile_id=profile, is_subagent=False, tainted_by=tainted, fetched_hosts=hosts, rules=rules)


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    d = tmp_path / "session"
    d.mkdir()
    return d


@pytest.mark.parametrize("tool,args,reason", [
    ("terminal", {"command": "df -h"}, "runs a program on the Navi server"),
    ("code_exec", {"code": "print(1)"}, "runs Python code on the Navi server"),
    ("ssh_exec", {"host": "web1", "command": "uptime"}, "runs a shell command on the SSH host 'web1'"),
    ("write_tool", {"name": "x", "code": "..."}, "installs new tool code that Navi can run from now on"),
    ("reload_tools", {}, "reloads the tools directory (changed tool code starts to run)"),
    ("http_request", {"url": "https://api.example.com/x", "method": "POST"},
     "sends a POST request (it can change data or send data out)"),
    ("http_request", {"url": "https://api.example.com/x", "method": "delete"},
     "sends a DELETE request (it can change data or send data out)"),
    ("mcp__files__delete", {"path": "/x"}, "calls a tool of the MCP server 'files' (a third-party program)"),
])
def test_ask_by_default(tool, args, reason, sdir) -> None:
    verdict = classify(check(tool, args), [], session_dir=sdir)
    assert (verdict.decision, verdict.reason, verdict.audited) == ("ask", reason, True)


@pytest.mark.parametrize("tool,args", [
    ("web_search", {"query": "x"}), ("web_view", {"url": "https://example.com/?q=1"}), ("todo", {"action": "read"}),
    ("http_request", {"url": "https://example.com/"}), ("http_request", {"url": "https://example.com/", "method": "HEAD"}),
    ("filesystem", {"action": "read", "path": "/etc/hostname"}), ("filesystem", {"action": "write", "path": "notes.md"}),
    ("filesystem", {"action": "move", "path": "a.txt", "destination": "sub/b.txt"}),
    ("filesystem", {"action": "mkdir", "path": "/tmp/anything"}), ("spawn_agent", {"task": "t"}),
])
def test_allow_by_default(tool, args, sdir) -> None:
    verdict = classify(check(tool, args), [], session_dir=sdir)
    assert (verdict.decision, verdict.audited) == ("allow", False)


@pytest.mark.parametrize("args", [
    {"action": "write", "path": "/etc/hosts", "content": "x"}, {"action": "append", "path": "/tmp/log"},
    {"action": "delete", "path": "../other-session/x"}, {"action": "move", "path": "a.txt", "destination": "/tmp/a"},
])
def test_filesystem_writes_outside_the_session_directory_ask(args, sdir) -> None:
    verdict = classify(check("filesystem", args), [], session_dir=sdir)
    assert verdict.decision == "ask" and verdict.reason.endswith("a file outside this conversation's own directory")


def test_a_symlink_out_of_the_session_directory_is_outside(sdir, tmp_path) -> None:
    (sdir / "out").symlink_to(tmp_path)
    assert classify(check("filesystem", {"action": "write", "path": "out/x"}), [], session_dir=sdir).decision == "ask"


def test_admin_rules_most_specific_wins(sdir) -> None:
    rules = [RuleView(profile_id=None, tool="terminal", action="", decision="deny"),
             RuleView(profile_id="p", tool="terminal", action="", decision="ask", allow_patterns=("df*", "uptime")),
             RuleView(profile_id="p", tool="mcp__*", action="", decision="allow"),
             RuleView(profile_id="p", tool="filesystem", action="delete", decision="deny"),
             RuleView(profile_id="p", tool="http_request", action="PUT", decision="allow")]
    assert classify(check("terminal", {"command": "df -h"}), rules, session_dir=sdir).decision == "allow"
    assert classify(check("terminal", {"command": "uptime"}), rules, session_dir=sdir).via == "pattern"
    assert classify(check("terminal", {"command": "uptime -p"}), rules, session_dir=sdir).decision == "ask"
    assert classify(check("terminal", {"command": "ls"}, profile="q"), rules, session_dir=sdir).decision == "deny"
    allowed = classify(check("mcp__x__y"), rules, session_dir=sdir)
    assert (allowed.decision, allowed.audited) == ("allow", True)  # an ask-class tool's runs stay audited
    denied = classify(check("filesystem", {"action": "delete", "path": "x"}), rules, session_dir=sdir)
    assert denied.decision == "deny" and denied.reason == "an administrator's rule denies filesystem (delete) for this profile"
    assert classify(check("filesystem", {"action": "write", "path": "x"}), rules, session_dir=sdir).decision == "allow"
    assert classify(check("http_request", {"url": "https://a/", "method": "PUT"}), rules, session_dir=sdir).decision \
        == "allow"
    assert classify(check("http_request", {"url": "https://a/", "method": "POST"}), rules, session_dir=sdir).decision \
        == "ask"


def test_an_ask_rule_on_a_harmless_tool(sdir) -> None:
    verdict = classify(check("web_search", {"query": "x"}), [RuleView(profile_id="p", tool="web_search", action="",
                                                                      decision="ask")], session_dir=sdir)
    assert verdict.decision == "ask" and verdict.reason == "an administrator's rule asks before this tool runs"


# -- the exfiltration guard ----------------------------------------------------------------------

TAINT = ("example.com",)


@pytest.mark.parametrize("tool,args", [
    ("http_request", {"url": "https://evil.example/x"}),                    # a new host
    ("web_view", {"url": "https://evil.example/"}),
    ("http_request", {"url": "https://example.com/x?secret=1"}),           # a query
    ("web_view", {"url": "https://example.com/next?page=2"}),
    ("http_request", {"url": "https://example.com/x", "params": {"a": "b"}}),
    ("http_request", {"url": "https://example.com/x", "body": "data"}),
    ("http_request", {"url": "https://example.com/x", "json": None}),
    ("schedule_recall", {"call_type": "immediate", "additional_context_message": "x"}),
])
def test_guard_asks_when_tainted(tool, args, sdir) -> None:
    verdict = classify(check(tool, args, tainted=TAINT, hosts=frozenset(TAINT)), [], session_dir=sdir)
    assert (verdict.decision, verdict.via, verdict.tainted_by, verdict.audited) == ("ask", "guard", TAINT, True)
    assert verdict.reason.startswith("this turn read example.com, and ")
    assert classify(check(tool, args), [], session_dir=sdir).decision == "allow"  # untainted: allowed


def test_guard_lets_a_plain_get_to_a_host_already_fetched_through(sdir) -> None:
    verdict = classify(check("web_view", {"url": "https://example.com/about"}, tainted=TAINT, hosts=frozenset(TAINT)),
                       [], session_dir=sdir)
    assert verdict.decision == "allow"
    assert classify(check("todo", {"action": "read"}, tainted=TAINT), [], session_dir=sdir).decision == "allow"


def test_guard_overrides_allow_rules_and_patterns_but_not_deny(sdir) -> None:
    rules = [RuleView(profile_id="p", tool="terminal", action="", decision="allow", allow_patterns=("df*",)),
             RuleView(profile_id="p", tool="ssh_exec", action="", decision="deny")]
    verdict = classify(check("terminal", {"command": "df -h"}, tainted=("uploaded file cv.pdf",)), rules, session_dir=sdir)
    assert verdict.decision == "ask" and verdict.tainted_by == ("uploaded file cv.pdf",)
    assert verdict.reason == ("runs a program on the Navi server; this turn read uploaded file cv.pdf, and it can act "
                              "on the machine or send data out")
    assert classify(check("ssh_exec", {"host": "h", "command": "x"}, tainted=TAINT), rules, session_dir=sdir).decision \
        == "deny"


def test_the_card_names_at_most_three_sources(sdir) -> None:
    verdict = classify(check("code_exec", {"code": "1"}, tainted=("a.com", "b.com", "c.com", "d.com", "e.com")), [],
                       session_dir=sdir)
    assert "this turn read a.com, b.com, c.com and 2 more" in verdict.reason


def test_ask_tools_of_a_profile() -> None:
    names = ["web_search", "terminal", "code_exec", "filesystem", "http_request", "mcp__a__b", "ssh_exec"]
    rules = [RuleView(profile_id="p", tool="code_exec", action="", decision="allow"),
             RuleView(profile_id="p", tool="ssh_exec", action="", decision="ask", allow_patterns=("uptime",))]
    assert ask_tools(names, rules, profile_id="p") == {"terminal", "mcp__a__b"}
