"""Issue 50, item 5: a stdio MCP server's answer over the message cap never reaches the
bot's event loop: it is dropped on the way (`adapters.mcp.relay`) and the call answers a
size error at once; the server stays up and its next call works.

A real SDK server over stdio (tests/mcp_big_server.py) answering 16 MB.
"""

from __future__ import annotations

import io
import sys

import pytest

from adapters.mcp.relay import relay, size_error
from adapters.mcp.servers import MAX_MESSAGE_BYTES, McpServers, ServerConfig
from bot.errors import ToolError
from tests.bot_process import ROOT


@pytest.mark.slow
async def test_an_answer_over_the_cap_is_a_size_error_and_the_server_stays_up() -> None:
    config = ServerConfig(
        name="big", command=sys.executable, args=("-m", "tests.mcp_big_server"), cwd=ROOT
    )
    servers = McpServers([config])
    await servers.start()
    try:
        with pytest.raises(ToolError) as refused:
            await servers.call_tool("big", "big", {"megabytes": 16}, within=60)
        assert refused.value.code == "too_large"
        assert "more than 4 MB" in str(refused.value)
        answer = await servers.call_tool("big", "small", {}, within=30)
        assert answer.content[0].text == "small and fine"
        assert servers.servers["big"].restarts == 0
    finally:
        await servers.aclose()


def test_the_relay_passes_lines_and_replaces_an_oversized_one() -> None:
    big = b'{"jsonrpc":"2.0","id":7,"result":{"text":"' + b"y" * 5000 + b'"}}'
    source = io.BufferedReader(io.BytesIO(b'{"id":1}\n' + big + b'\n{"id":2}\n'))  # type: ignore[arg-type]
    sink = io.BytesIO()
    relay(source, sink, 1000)
    lines = sink.getvalue().splitlines()
    assert lines[0] == b'{"id":1}'
    assert lines[1] == size_error(big[:100], 1000).rstrip(b"\n")
    assert b'"id": 7' in lines[1]
    assert lines[2] == b'{"id":2}'
    assert MAX_MESSAGE_BYTES == 4 * 1024 * 1024
