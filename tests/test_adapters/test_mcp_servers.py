"""The MCP adapter: results mapped from the SDK's types, and a streamable-HTTP server that
dies and comes back (tests/mcp_http_server.py, a real SDK server in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types
import pytest

from adapters.mcp.servers import McpServers, ServerConfig, _result
from bot.errors import ToolError
from bot.tools.mcp import McpContent
from tests.bot_process import ROOT, eventually
from tests.deadlines import EVENT, PROCESS_READY, REAP, deadline


def test_result_blocks_become_text_or_what_stands_for_them() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="hello"),
            mcp_types.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            mcp_types.ResourceLink(uri="file:///b.bin", name="b"),
        ],
        structured_content={"n": 1},
        is_error=True,
    )
    mapped = _result(result)
    assert mapped.content == (
        McpContent(kind="text", text="hello"),
        McpContent(kind="image", mime_type="image/png", size=8, data=b"\x89PNG\r\n\x1a\n"),
        McpContent(kind="resource", text="inside"),
        McpContent(kind="resource", text="[resource file:///b.bin]"),
    )
    assert mapped.is_error
    assert mapped.structured == '{"n": 1}'


class WebServer:
    """The test server on one port, started again on the same port after a kill."""

    def __init__(self, tmp_path: Path) -> None:
        self.port_file = tmp_path / "web.port"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    async def start(self) -> None:
        self.port_file.unlink(missing_ok=True)
        self.process = subprocess.Popen(  # noqa: ASYNC220 (a server for the test's length)
            [sys.executable, "-m", "tests.mcp_http_server", str(self.port_file), str(self.port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        async def listening() -> bool:
            return self.port_file.is_file() and self.port_file.read_text().strip() != ""

        await eventually(listening, PROCESS_READY)
        self.port = int(self.port_file.read_text())

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=deadline(REAP))


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebServer]:
    server = WebServer(tmp_path)
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.slow
async def test_an_http_server_that_dies_answers_errors_then_works_again(web: WebServer) -> None:
    await web.start()
    servers = McpServers([ServerConfig(name="web", url=f"http://127.0.0.1:{web.port}/mcp")])
    await servers.start()
    try:
        answer = await servers.call_tool("web", "echo", {"text": "one"}, within=10)
        assert answer.content[0].text.startswith("echo: one")
        web.kill()
        with pytest.raises(ToolError) as down:
            await servers.call_tool("web", "echo", {"text": "two"}, within=10)
        assert down.value.code == "server_down"
        await web.start()  # the same port
        assert await servers.servers["web"].wait_up(deadline(EVENT))
        answer = await servers.call_tool("web", "echo", {"text": "three"}, within=10)
        assert answer.content[0].text.startswith("echo: three")
        assert servers.servers["web"].restarts >= 1
    finally:
        await servers.aclose()
