"""Issue 50, item 5: a stdio MCP server's stderr is read and logged under its name,
rate-limited, never written into the bot's own stderr.

The real `mcp-server-time` package, started by a shim that first writes 5,000 lines to its
stderr (one call of a chatty server wrote 5.7 MB of raw lines into the bot's log).
"""

from __future__ import annotations

import logging
import sys

import pytest

from adapters.mcp.servers import McpServers, ServerConfig
from adapters.mcp.stderr import LINES_PER_MINUTE

pytestmark = pytest.mark.slow

SHIM = (
    "import runpy, sys\n"
    "for n in range(5000):\n"
    "    sys.stderr.write(f'noise line {n} ' + 'x' * 500 + '\\n')\n"
    "sys.stderr.flush()\n"
    "sys.argv = ['mcp-server-time', '--local-timezone', 'UTC']\n"
    "runpy.run_module('mcp_server_time', run_name='__main__')\n"
)


async def test_a_servers_stderr_is_logged_under_its_name_and_rate_limited(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="tgbot.mcp")
    servers = McpServers([ServerConfig(name="chatty", command=sys.executable, args=("-c", SHIM))])
    await servers.start()
    try:
        answer = await servers.call_tool(
            "chatty", "get_current_time", {"timezone": "UTC"}, within=30
        )
        assert answer.content
    finally:
        await servers.aclose()
    logged = [r.getMessage() for r in caplog.records if r.name == "tgbot.mcp"]
    lines = [m for m in logged if m.startswith("mcp server chatty stderr: noise line")]
    assert 0 < len(lines) <= LINES_PER_MINUTE
    assert all(len(m) < 400 for m in lines)  # each cut at 300 characters
    assert any(m.startswith("mcp server chatty: ") and "not logged" in m for m in logged)
    assert "noise line" not in capfd.readouterr().err
