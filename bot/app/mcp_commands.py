"""`tgbot mcp list` and `tgbot mcp reload`, and the MCP lines of `tgbot doctor`.

Each starts the configured servers itself (a stdio server is a child of this command for
the time it runs), reads their tool lists and stops them. `reload` then compares what they
list now with what the running bot offers (`DATA_DIR/mcp/offered.json`), says how many
cached prefixes the change will invalidate (one per chat session of each scene whose tool
list changes) and touches `DATA_DIR/mcp/reload`, which the running bot watches
(`bot.app.mcp_servers`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from bot.app.mcp_servers import (
    SCENES,
    access_of,
    read_offered,
    reload_flag,
    scene_digests,
    server_config,
    tools_of,
)
from bot.app.preflight import sqlite_file
from bot.app.wiring import register_settings_secrets
from bot.config import McpServer, Settings, load_settings
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.tools.base import Tool

OK = "✔"
FAILED = "✘"
START_SECONDS = 20.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerReport:
    server: McpServer
    where: str
    error: str
    tools: tuple[Tool, ...]
    """Its tools as the bot would offer them now (allow/deny applied)."""

    @property
    def up(self) -> bool:
        return not self.error

    def line(self) -> str:
        if not self.up:
            return f"{FAILED} mcp {self.server.name}: {self.where}: {self.error}"
        scenes = ", ".join(sorted(access_of(self.server, None).offered_scenes))
        schemas = estimate_tool_schema_tokens([t.spec.schema() for t in self.tools])
        return (
            f"{OK} mcp {self.server.name}: {self.where}: {len(self.tools)} tools, "
            f"~{schemas} tokens of schemas in every request (offered in {scenes}; run by "
            f"{self.server.members})"
        )


async def inspect_servers(settings: Settings) -> tuple[list[ServerReport], tuple[Tool, ...]]:
    """Start every server, read its tools, stop it: one report per server, and every
    tool as the bot would offer it now."""
    from adapters.mcp.servers import McpServers

    register_settings_secrets(settings)
    servers = McpServers([server_config(s) for s in settings.mcp.servers])
    try:
        await servers.start(wait_seconds=START_SECONDS)
        tools = tools_of(settings, servers)
        reports = []
        for server in settings.mcp.servers:
            running = servers.servers[server.name]
            error = ""
            if running.listed is None:
                error = running.last_error or f"no answer within {START_SECONDS:g} s"
            reports.append(
                ServerReport(
                    server=server,
                    where=f"{running.config.transport} {running.config.where}",
                    error=error,
                    tools=tuple(t for t in tools if t.origin == server.name),
                )
            )
    finally:
        await servers.aclose()
    return reports, tools


async def mcp_list(config: str | None, *, out: TextIO | None = None) -> int:
    """Every server (✔/✘) and the tools it offers; exit 1 when one did not start."""
    write = (out or sys.stdout).write
    settings = load_settings(config)
    if not settings.mcp.servers:
        write("no MCP servers configured ([[mcp.servers]] in the TOML settings)\n")
        return 0
    reports, _ = await inspect_servers(settings)
    for report in reports:
        write(report.line() + "\n")
        for tool in report.tools:
            write(f"    {tool.spec.name}: {tool.spec.description[:100]}\n")
    return 0 if all(r.up for r in reports) else 1


async def mcp_reload(config: str | None, *, out: TextIO | None = None) -> int:
    """Ask the running bot to read its servers' tool lists again, after saying what it
    will cost."""
    write = (out or sys.stdout).write
    settings = load_settings(config)
    if not settings.mcp.servers:
        write("no MCP servers configured: nothing to reload\n")
        return 0
    reports, tools = await inspect_servers(settings)
    for report in reports:
        write(report.line() + "\n")
    offered = read_offered(settings)
    now = scene_digests(tools)
    if offered is None:
        changed = list(SCENES)
        write("no running bot has written what it offers (DATA_DIR/mcp/offered.json)\n")
    else:
        changed = [scene for scene in SCENES if offered.get(scene) != now[scene]]
    if not changed:
        write("the tool lists are as the bot offers them: nothing to reload, no prefix lost\n")
        return 0
    sessions = await _sessions(settings)
    if sessions is None:
        count = "the cached prefixes"
    else:
        count = f"{sum(sessions.get(scene, 0) for scene in changed)} cached prefixes"
    flag = reload_flag(settings)
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.write_text("reload\n", encoding="utf-8")
    flag.touch()
    write(
        f"reload asked: the tool list changes in {', '.join(changed)}; this invalidates "
        f"{count} (one per chat session there: each pays full price once)\n"
        f"a running bot on DATA_DIR={settings.data_dir} applies it within seconds\n"
    )
    return 0


async def _sessions(settings: Settings) -> dict[str, int] | None:
    from storage.dashboard import sessions_per_scene
    from storage.engine import create_engine_for

    url = settings.resolved_database_url
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        return {}
    engine = create_engine_for(url)
    try:
        return await sessions_per_scene(engine)
    except Exception:
        return None
    finally:
        await engine.dispose()
