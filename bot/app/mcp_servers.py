"""MCP servers in a running bot: started before the first update, their tools frozen into
the runner's table, reloaded only when `tgbot mcp reload` asks, stopped on shutdown.

How a running bot learns of a reload: `tgbot mcp reload` writes `DATA_DIR/mcp/reload`; every
`tgbot run` on that data directory checks the file's time every `RELOAD_POLL_SECONDS`, reads
its servers' tool lists again and swaps its MCP tools (between turns: the table is read when
a turn starts). A flag file rather than a signal: it reaches every worker that shares the
data directory and needs no process id. The bot writes what it offers per scene to
`DATA_DIR/mcp/offered.json`, which the reload compares against to say how many cached
prefixes it will invalidate.

Nothing here imports the SDK unless servers are configured (`start_mcp` imports the adapter).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from bot.app.wiring import register_settings_secrets
from bot.config import McpServer, Settings
from bot.domain.ids import Scene
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext
from bot.tools.mcp import McpAccess, McpCalls, server_tools, tools_digest

if TYPE_CHECKING:
    from adapters.mcp.servers import McpServers, ServerConfig

log = logging.getLogger("tgbot.mcp")

RELOAD_POLL_SECONDS = 2.0
SCENES: tuple[Scene, ...] = get_args(Scene)


def mcp_dir(settings: Settings) -> Path:
    return settings.data_dir / "mcp"


def reload_flag(settings: Settings) -> Path:
    return mcp_dir(settings) / "reload"


def offered_file(settings: Settings) -> Path:
    return mcp_dir(settings) / "offered.json"


def server_config(server: McpServer) -> ServerConfig:
    from adapters.mcp.servers import ServerConfig

    return ServerConfig(
        name=server.name,
        command=server.command,
        args=tuple(server.args),
        env={k: v.get_secret_value() for k, v in server.env.items()},
        cwd=server.cwd,
        url=server.url,
        headers={k: v.get_secret_value() for k, v in server.headers.items()},
        timeout_seconds=server.timeout_seconds,
    )


def access_of(server: McpServer, owner_id: int | None) -> McpAccess:
    return McpAccess(
        scenes=frozenset(server.scenes),
        chats=frozenset(server.chats),
        members=server.members,
        owner_id=owner_id,
    )


def tools_of(settings: Settings, servers: McpServers, *, latest: bool = False) -> tuple[Tool, ...]:
    """The tools of every server that listed some, servers in settings order, each server's
    sorted: `listed` (as read at start-up or the last reload) or, with `latest`, the list
    read on each server's newest connection."""
    calls: McpCalls = servers
    tools: list[Tool] = []
    for server in settings.mcp.servers:
        running = servers.servers[server.name]
        listed = running.latest if latest else running.listed
        if listed is None:
            continue
        tools += server_tools(
            server.name,
            listed,
            calls=calls,
            access=access_of(server, settings.owner_id),
            allow=server.allow,
            deny=server.deny,
            reference_params=server.message_reference_params,
            timeout_seconds=server.timeout_seconds,
        )
    return tuple(tools)


def scene_digests(tools: Sequence[Tool]) -> dict[str, str]:
    """Per scene, a hash of the MCP tools its requests offer."""
    return {
        scene: hashlib.sha256(
            tools_digest([t for t in tools if t.scenes is None or scene in t.scenes]).encode()
        ).hexdigest()[:16]
        for scene in SCENES
    }


def write_offered(settings: Settings, tools: Sequence[Tool]) -> None:
    path = offered_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "scenes": scene_digests(tools),
        "tools": [
            {
                **t.spec.schema(),
                "summary": t.summary,
                "scenes": sorted(t.scenes or ()),
                "origin": t.origin,
            }
            for t in tools
        ],
    }
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(temporary, path)


def read_offered(settings: Settings) -> dict[str, str] | None:
    try:
        data = json.loads(offered_file(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    scenes = data.get("scenes") if isinstance(data, dict) else None
    return scenes if isinstance(scenes, dict) else None


def offered_tools(settings: Settings) -> tuple[Tool, ...]:
    """The MCP tools the running bot offers, as it wrote them (`offered.json`), for a
    command that shows a request without starting the servers (`tgbot context show`);
    running one is an error. Nothing when no bot wrote the file."""
    if not settings.mcp.servers:
        return ()
    try:
        data = json.loads(offered_file(settings).read_text(encoding="utf-8"))
        entries = data["tools"]
        return tuple(_stand_in(entry) for entry in entries)
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def _stand_in(entry: dict[str, Any]) -> Tool:
    async def not_here(args: Mapping[str, Any], ctx: ToolContext) -> str:
        raise ToolError("the MCP server runs in the bot, not here", code="server_down")

    scenes = frozenset(s for s in entry["scenes"] if s in SCENES)
    return Tool(
        spec=ToolSpec(
            name=str(entry["name"]),
            description=str(entry["description"]),
            parameters=dict(entry["parameters"]),
        ),
        run=not_here,
        summary=str(entry.get("summary", "")),
        scenes=scenes,
        origin=str(entry.get("origin", "")),
    )


@dataclass(slots=True)
class RunningMcp:
    """The servers of a running bot and the tools it offers from them."""

    settings: Settings
    servers: McpServers
    tools: tuple[Tool, ...]
    _flag_seen: float = 0.0

    async def reload(self, table: MutableMapping[str, Tool]) -> tuple[str, ...]:
        """Read every running server's tool list again and put the new tools in `table`
        (the runner's live table) in place of the old; returns the scenes whose offered
        tools changed."""
        for server in self.servers.servers.values():
            try:
                await server.list_tools()
            except Exception as exc:  # a server that is down keeps the tools it had
                log.warning("mcp reload: %s kept its tools (%s)", server.config.name, exc)
        before = scene_digests(self.tools)
        for server in self.servers.servers.values():
            if server.latest is not None:
                server.listed = server.latest
                server.list_changed = False
        tools = tools_of(self.settings, self.servers)
        for tool in self.tools:
            table.pop(tool.spec.name, None)
        for tool in tools:
            table[tool.spec.name] = tool
        self.tools = tools
        write_offered(self.settings, tools)
        after = scene_digests(tools)
        changed = tuple(scene for scene in SCENES if before[scene] != after[scene])
        log.info(
            "mcp reload: %d tools offered; changed in %s",
            len(tools),
            ", ".join(changed) or "no scene",
        )
        return changed

    async def watch_reloads(self, table: MutableMapping[str, Tool], stop: asyncio.Event) -> None:
        """Reload whenever `tgbot mcp reload` touches the flag file, until `stop`."""
        flag = reload_flag(self.settings)
        self._flag_seen = _mtime(flag)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RELOAD_POLL_SECONDS):
                    await stop.wait()
            seen = _mtime(flag)
            if seen != self._flag_seen:
                self._flag_seen = seen
                try:
                    await self.reload(table)
                except Exception:
                    log.exception("mcp reload failed; the tools offered are unchanged")

    async def aclose(self) -> None:
        await self.servers.aclose()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime_ns / 1e9
    except OSError:
        return 0.0


async def start_mcp(settings: Settings) -> RunningMcp | None:
    """Start the configured servers (None, and no SDK import, when there are none) and
    freeze the tools they list now. A server that does not start is retried in the
    background; its tools are offered from the next restart or reload on."""
    if not settings.mcp.servers:
        return None
    from adapters.mcp.servers import McpServers

    register_settings_secrets(settings)  # env values and headers: never in a log
    servers = McpServers([server_config(s) for s in settings.mcp.servers])
    await servers.start()
    for name, server in servers.servers.items():
        if server.listed is None:
            log.warning(
                "mcp server %s did not start (%s); its tools are not offered until a "
                "restart or `tgbot mcp reload`",
                name,
                server.last_error or "no answer",
            )
    tools = tools_of(settings, servers)
    write_offered(settings, tools)
    return RunningMcp(settings=settings, servers=servers, tools=tools)
