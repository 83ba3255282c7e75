"""A tiny real MCP server (stdio) for tests: tools ``echo`` and ``add``.

Run as ``python tests/fakes/mcp_echo_server.py``; the client side speaks to it
over stdin/stdout exactly as it would to any third-party server.
"""
from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool(description="Echo the given text back unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers and return the sum.")
def add(a: int, b: int) -> int:
    return a + b


if __name__ == "__main__":
    server.run("stdio")
