"""A small streamable-HTTP MCP server for the tests, written with the official SDK.

`python -m tests.mcp_http_server PORT_FILE [PORT]` binds 127.0.0.1 on PORT (default: a free
one), writes the port to PORT_FILE once it listens, and serves `/mcp` until killed. Its tools:
- `echo(text)`: the text back, with the `Authorization` header it was sent (so a test sees
  the configured header reached the server, and nowhere else);
- `grow()`: adds the tool `extra` and tells the client its tool list changed (the test of
  the frozen prefix);
- `quote(message)`: `message` is marked `x-message-reference`: it says what it received;
- `picture()`: a 1×1 PNG image block.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from pathlib import Path
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from pydantic import Field

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

server = MCPServer("web")


@server.tool()
async def echo(text: str, ctx: Context) -> str:
    """Say the text back."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    auth = headers.get("authorization", "") if headers is not None else ""
    return f"echo: {text} (authorization: {auth})"


def extra() -> str:
    """A tool added while the server runs."""
    return "extra"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool to this server's list."""
    server.add_tool(extra)
    with contextlib.suppress(Exception):
        await ctx.notify_tools_changed()  # 2026-07-28: to listeners
    with contextlib.suppress(Exception):
        await ctx.session.send_tool_list_changed()  # 2025-11-25: to the session
    return "grown"


@server.tool()
def quote(
    message: Annotated[
        int, Field(description="the message", json_schema_extra={"x-message-reference": True})
    ],
) -> str:
    """Quote a message by reference."""
    return f"received message {message}"


@server.tool()
def picture() -> Image:
    """A tiny picture."""
    return Image(data=PNG, format="png")


async def serve(sock: socket.socket) -> None:
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(port_file: Path, port: int = 0) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # connections wait in the backlog until the server serves
    port_file.write_text(str(sock.getsockname()[1]), encoding="utf-8")
    asyncio.run(serve(sock))


if __name__ == "__main__":
    main(Path(sys.argv[1]), *(int(arg) for arg in sys.argv[2:3]))
