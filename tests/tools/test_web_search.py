"""web_search with a local stand-in backend (WEB_SEARCH_BACKEND), plus one real DDGS call when online."""
from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from tools_app.base import ToolError
from tools_app.builtins.web_search import WebSearchTool

tool = WebSearchTool()
CALLS: list[tuple[str, int]] = []


def fake_backend(query: str, max_results: int) -> list[dict[str, Any]]:
    CALLS.append((query, max_results))
    return [{"title": f"Result {i}", "href": f"https://example.com/{i}", "body": f"snippet  {i}\n more"}
            for i in range(1, 20)][:max_results]


def failing_backend(query: str, max_results: int) -> list[dict[str, Any]]:
    raise RuntimeError("rate limited")


def slow_backend(query: str, max_results: int) -> list[dict[str, Any]]:
    time.sleep(0.8)
    return []


def empty_backend(query: str, max_results: int) -> list[dict[str, Any]]:
    return []


@pytest.fixture
def backend(settings):
    def use(name: str) -> None:
        settings.WEB_SEARCH_BACKEND = f"{__name__}.{name}"
    return use


async def test_results_are_numbered(tool_ctx, backend) -> None:
    backend("fake_backend")
    result = await tool.execute({"query": "navi agent", "max_results": 3})
    assert result.success and tool.untrusted_output
    assert result.output.splitlines()[0] == "Search results for 'navi agent':"
    assert "1. Result 1\n   https://example.com/1\n   snippet 1 more" in result.output
    assert "3. Result 3" in result.output and "4. Result 4" not in result.output


async def test_max_results_capped_at_ten(tool_ctx, backend) -> None:
    backend("fake_backend")
    CALLS.clear()
    result = await tool.execute({"query": "x", "max_results": 50})
    assert CALLS == [("x", 10)] and "10. Result 10" in result.output


async def test_backend_failure_is_a_tool_error(tool_ctx, backend) -> None:
    backend("failing_backend")
    with pytest.raises(ToolError, match="web search failed: RuntimeError: rate limited"):
        await tool.execute({"query": "x"})


async def test_timeout(tool_ctx, backend, settings) -> None:
    backend("slow_backend")
    settings.WEB_SEARCH_TIMEOUT = 0.3
    with pytest.raises(ToolError, match="took longer than"):
        await tool.execute({"query": "x"})


async def test_no_results_and_bad_backend(tool_ctx, backend, settings) -> None:
    backend("empty_backend")
    assert (await tool.execute({"query": "x"})).output == "No results for 'x'."
    settings.WEB_SEARCH_BACKEND = "no.such.module.search"
    with pytest.raises(ToolError, match="WEB_SEARCH_BACKEND='no.such.module.search' cannot be imported"):
        await tool.execute({"query": "x"})


def _online() -> bool:
    try:
        socket.create_connection(("duckduckgo.com", 443), timeout=2).close()
        return True
    except OSError:
        return False


async def test_real_ddgs(tool_ctx, settings) -> None:
    if not _online():
        pytest.skip("no internet connection (duckduckgo.com:443 unreachable within 2 s)")
    settings.WEB_SEARCH_BACKEND = "ddgs"
    result = await tool.execute({"query": "python programming language", "max_results": 3})
    assert result.success and "1. " in result.output and "http" in result.output
