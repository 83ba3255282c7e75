"""MCP: a real stdio server process (tests/fakes/mcp_echo_server.py) and a server that cannot start."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.tools.registry_support import meta_registry, tools_env  # noqa: F401
from tools_app.mcp_client import load_server_specs, tool_name

ECHO_SERVER = Path(__file__).resolve().parent.parent / "fakes" / "mcp_echo_server.py"


def _write_config(path: Path, servers: dict) -> None:
    path.write_text(json.dumps({"servers": servers}))


@pytest.fixture
async def registry(tools_env):  # noqa: F811
    _write_config(tools_env.mcp_file, {
        "echo": {"command": sys.executable, "args": [str(ECHO_SERVER)], "timeout": 20},
        "ghost": {"command": "/nonexistent/navi-mcp-server", "connect_timeout": 5},
    })
    reg = meta_registry()
    await reg.ensure_mcp()
    yield reg
    await reg.aclose()


async def test_tools_listed_called_and_down_server_reported(registry):
    names = registry.names()
    assert "mcp__echo__echo" in names and "mcp__echo__add" in names
    tool = registry.get("mcp__echo__add")
    assert tool.source == "mcp" and "Add two integers" in tool.description
    assert tool.parameters["required"] == ["a", "b"]

    result = await registry.execute("mcp__echo__add", {"a": 2, "b": 3})
    assert result.success, result.error
    assert "\n5\n" in result.output and result.output.startswith("<untrusted")  # third-party data is marked
    echoed = await registry.execute("mcp__echo__echo", {"text": "hi there"})
    assert "hi there" in echoed.output
    bad = await registry.execute("mcp__echo__add", {"a": "two", "b": 3})
    assert not bad.success and "field 'a' must be of type integer" in bad.error

    rows = {row.name: row for row in registry.all()}
    assert rows["mcp__echo__add"].status == "ok"
    ghost = rows["mcp__ghost__*"]
    assert ghost.status == "unavailable" and "command not found" in ghost.detail

    status = (await registry.execute("mcp_status", {})).output
    assert "- echo (stdio): connected, 2 tools: mcp__echo__add, mcp__echo__echo" in status
    assert "- ghost (stdio): UNAVAILABLE: cannot start '/nonexistent/navi-mcp-server': command not found" in status
    listed = (await registry.execute("list_tools", {"source": "mcp"})).output
    assert "mcp__ghost__* [mcp] UNAVAILABLE" in listed and "mcp__echo__echo [mcp] ok" in listed

    assert set(registry.tools_for_profile([])) == {"mcp__echo__add", "mcp__echo__echo"}


async def test_connection_is_reused_and_reconnects_after_close(registry):
    manager = registry.mcp
    await registry.execute("mcp__echo__echo", {"text": "a"})
    first = manager._conns["echo"]
    await registry.execute("mcp__echo__echo", {"text": "b"})
    assert manager._conns["echo"] is first
    await first.wait_closed()
    again = await registry.execute("mcp__echo__echo", {"text": "c"})
    assert again.success and manager._conns["echo"] is not first


async def test_reload_drops_removed_servers(registry, tools_env):  # noqa: F811
    _write_config(tools_env.mcp_file, {})
    report = await registry.reload()
    assert report.mcp == []
    assert not [n for n in registry.names() if n.startswith("mcp__")]
    result = await registry.execute("mcp__echo__echo", {"text": "x"})
    assert not result.success and "unknown tool" in result.error


def test_config_parsing(tmp_path):
    path = tmp_path / "mcp.json"
    assert load_server_specs(path) == ([], [])
    path.write_text("{broken")
    assert "not valid JSON" in load_server_specs(path)[1][0]
    _write_config(path, {
        "web": {"url": "http://127.0.0.1:9/mcp"},
        "both": {"command": "x", "url": "http://x"},
        "bad url": {"url": "ftp://x"},
        "off": {"command": "x", "disabled": True},
    })
    specs, errors = load_server_specs(path)
    assert [s.name for s in specs] == ["web"] and specs[0].transport == "http"
    assert len(errors) == 2
    assert tool_name("my.server", "get issue/1") == "mcp__my_server__get_issue_1"
