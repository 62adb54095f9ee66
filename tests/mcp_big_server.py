"""A stdio MCP server for the tests, written with the official SDK: `big(megabytes)` answers
that many megabytes of text, `small()` a short line (`python -m tests.mcp_big_server`)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("big")


@server.tool()
def big(megabytes: int) -> str:
    """A long answer."""
    return "y" * (megabytes * 1024 * 1024)


@server.tool()
def small() -> str:
    """A short answer."""
    return "small and fine"


if __name__ == "__main__":
    server.run("stdio")
