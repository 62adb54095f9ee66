"""Running MCP servers: one supervisor task per server keeps a connection up.

A stdio server is a child process; a streamable-HTTP server is a URL. Each supervisor
connects, reads the tool list (the first one is what the bot offers until a reload), then
waits until the connection ends (the child exits, the HTTP server stops answering) or the
bot stops. A server that dies is started again after a backoff that doubles from
`FIRST_BACKOFF_SECONDS` to `MAX_BACKOFF_SECONDS` (and starts over once it stayed up a
minute); meanwhile its tools answer a tool error and the turn goes on.

A server's `notifications/tools/list_changed` (or, on 2026-07-28 connections, the
`subscriptions/listen` event) is logged and remembered, never applied here: the tool
schemas open every cached prefix (see `bot.tools.mcp`).

Secrets: the env values and headers are handed to the SDK only; every message this module
logs or returns goes through `bot.redact.scrub` (the app registers those values).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from adapters.mcp import relay
from adapters.mcp.stderr import server_stderr
from bot.errors import ToolError
from bot.redact import scrub
from bot.tools.mcp import ListedTool, McpContent, McpResult

log = logging.getLogger("tgbot.mcp")

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""The largest message a stdio server's answer may be; a larger one is answered with a
size error by the relay, so a 30 MB result never reaches the bot's event loop."""
RELAY = relay.__file__
logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request, like httpx's

FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 60.0
HEALTHY_SECONDS = 60.0
"""A connection that lasted this long resets the backoff."""
CONNECT_TIMEOUT_SECONDS = 30.0
MAX_PAGES = 20
MAX_TOOLS = 256
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""An image in a tool result larger than this is named, never decoded (a member's file has
the same bound by default, `[media] max_document_mb`)."""
"""Tools read from one server; a server listing more is cut (each schema costs every call)."""
WAIT_FOR_RESTART_SECONDS = 3.0
"""A call to a server that is restarting waits this long for it before it answers an error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """How to reach one server (from `[[mcp.servers]]`, secrets as plain strings)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 30.0

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command else "http"

    @property
    def where(self) -> str:
        """What an operator reads: the command line or the URL (never env or headers)."""
        if self.command:
            return " ".join([self.command, *self.args])
        return self.url or ""


State = Literal["starting", "up", "down", "stopped"]


class McpServer:
    """One server, kept connected by its supervisor task."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.state: State = "starting"
        self.last_error = ""
        self.listed: tuple[ListedTool, ...] | None = None
        """The tool list read on the first connection (what the bot offers)."""
        self.latest: tuple[ListedTool, ...] | None = None
        """The tool list read on the newest connection."""
        self.list_changed = False
        """The server said its tool list changed since the bot read it."""
        self.restarts = 0
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._tried = asyncio.Event()
        self._gone = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.config.name}")

    async def wait_up(self, within: float) -> bool:
        """Whether the server is connected, waiting at most `within` seconds for it."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._up.wait()
        return self.state == "up"

    async def first_attempt(self, within: float) -> None:
        """Wait until the first connection succeeded or failed (at most `within` seconds)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._tried.wait()

    async def aclose(self) -> None:
        self._stopping.set()
        if self._task is not None:
            try:
                async with asyncio.timeout(10.0):
                    await self._task
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        self.state = "stopped"

    async def list_tools(self) -> tuple[ListedTool, ...]:
        """Read the tool list again from the running server (`tgbot mcp reload`)."""
        client = await self._connected(WAIT_FOR_RESTART_SECONDS)
        tools = await _read_tools(client)
        self.latest = tools
        return tools

    async def call_tool(self, tool: str, arguments: dict[str, Any], within: float) -> McpResult:
        timeout = within
        name = self.config.name
        client = await self._connected(min(timeout, WAIT_FOR_RESTART_SECONDS))
        try:
            async with asyncio.timeout(timeout):
                result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise ToolError(
                f"the MCP server {name!r} did not answer within {timeout:g} s", code="timeout"
            ) from None
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise ToolError(
                    f"the MCP server {name!r} did not answer within {timeout:g} s", code="timeout"
                ) from None
            if exc.code == relay.SIZE_ERROR:  # dropped on the way: the server stays up
                raise ToolError(
                    f"the MCP server {name!r} answered more than "
                    f"{MAX_MESSAGE_BYTES // (1024 * 1024)} MB: not read",
                    code="too_large",
                ) from None
            if exc.code != mcp_types.CONNECTION_CLOSED:
                raise ToolError(
                    scrub(f"the MCP server {name!r} refused the call: {exc}"),
                    code="server_error",
                ) from None
            self._gone.set()  # the connection broke: the supervisor starts it again
            raise ToolError(
                scrub(f"the MCP server {name!r} is not reachable ({exc}); it is restarting"),
                code="server_down",
            ) from None
        except Exception as exc:
            self._gone.set()
            raise ToolError(
                scrub(f"the MCP server {name!r} failed ({type(exc).__name__}: {exc}); restarting"),
                code="server_down",
            ) from None
        return _result(result)

    async def _connected(self, wait: float) -> Client:
        if self.state != "up":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._up.wait()
        client = self._client
        if client is None or self.state != "up":
            why = f" (last error: {self.last_error})" if self.last_error else ""
            raise ToolError(
                scrub(f"the MCP server {self.config.name!r} is not running{why}; it is restarting"),
                code="server_down",
            )
        return client

    async def _supervise(self) -> None:
        delay = FIRST_BACKOFF_SECONDS
        name = self.config.name
        while not self._stopping.is_set():
            self._gone = asyncio.Event()
            started = time.monotonic()
            try:
                await self._serve_once()
            except asyncio.CancelledError:
                # a cancel the SDK's task group did not take back (its connection broke
                # inside it); a cancel of the supervisor itself comes with `_stopping` set
                task = asyncio.current_task()
                if self._stopping.is_set() or task is None:
                    raise
                task.uncancel()
                self.last_error = "the connection was cancelled"
                log.warning("mcp server %s: %s", name, self.last_error)
            except Exception as exc:  # the server, its process or the network: start again
                self.last_error = scrub(_reason(exc))
                log.warning("mcp server %s: %s", name, self.last_error)
            finally:
                self._client = None
                self._up.clear()
                self._tried.set()
            if self._stopping.is_set():
                break
            self.state = "down"
            if time.monotonic() - started >= HEALTHY_SECONDS:
                delay = FIRST_BACKOFF_SECONDS
            log.warning("mcp server %s: down; starting it again in %gs", name, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
            delay = min(delay * 2, MAX_BACKOFF_SECONDS)
            self.restarts += 1

    async def _serve_once(self) -> None:
        """One connection, from connect to its end. Raises when it ended by itself."""
        client = Client(
            _watched(self._transport(), self._gone),
            message_handler=self._on_message,
            read_timeout_seconds=max(self.config.timeout_seconds, CONNECT_TIMEOUT_SECONDS),
            client_info=mcp_types.Implementation(name="tgbot", version="1"),
        )
        try:
            # the SDK's task groups live in this task: what breaks inside them cancels this
            # task's wait, and `async with` hands that back to them to be told apart
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    await stack.enter_async_context(client)
                await self._connected_until_gone(client)
        finally:
            self._client = None
            self._up.clear()
        if not self._stopping.is_set():
            raise ConnectionError("the connection ended")

    async def _connected_until_gone(self, client: Client) -> None:
        name = self.config.name
        tools = await _read_tools(client)
        if self.listed is None:
            self.listed = tools
        elif tools != self.listed:
            self._changed()
        self.latest = tools
        self._client = client
        self.state = "up"
        self.last_error = ""
        self._up.set()
        self._tried.set()
        log.info(
            "mcp server %s: %s with %d tools (%s)",
            name,
            "restarted" if self.restarts else "up",
            len(tools),
            client.protocol_version,
        )
        watch = None
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            watch = asyncio.create_task(self._listen(client))
        stop = asyncio.create_task(self._stopping.wait())
        dead = asyncio.create_task(self._gone.wait())
        try:
            await asyncio.wait((stop, dead), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (stop, dead, watch):
                if task is not None:
                    task.cancel()
            if watch is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watch

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        config = self.config
        if config.command is not None:
            # through the relay: a message over the cap is dropped and answered with a
            # size error there, never read into this process (`adapters.mcp.relay`)
            params = StdioServerParameters(
                command=sys.executable,
                args=[RELAY, str(MAX_MESSAGE_BYTES), "--", config.command, *config.args],
                env=dict(config.env) or None,
                cwd=config.cwd,
            )
            return _stdio(params, config.name)
        assert config.url is not None
        http = httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(30.0, read=300.0),
        )
        return _owning(http, streamable_http_client(config.url, http_client=http))

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._changed()

    async def _listen(self, client: Client) -> None:
        """On a 2026-07-28 connection the server tells of changes only to a listener."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _event in events:
                    self._changed()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a server without subscriptions: nothing to watch
            log.debug("mcp server %s: no change events (%s)", self.config.name, exc)

    def _changed(self) -> None:
        if self.list_changed:  # said once (a server may tell both ways)
            return
        self.list_changed = True
        log.info(
            "mcp server %s: its tool list changed; applied at the next restart or "
            "`tgbot mcp reload` (the tool schemas open every cached prefix)",
            self.config.name,
        )


@asynccontextmanager
async def _stdio(params: StdioServerParameters, name: str) -> AsyncIterator[Any]:
    """The SDK's stdio transport, the server's stderr logged under its name
    (`adapters.mcp.stderr`) rather than written into the bot's own."""
    async with server_stderr(name) as errlog, stdio_client(params, errlog=errlog) as streams:
        yield streams


@asynccontextmanager
async def _owning(http: httpx2.AsyncClient, transport: Any) -> AsyncIterator[Any]:
    async with http, transport as streams:
        yield streams


@asynccontextmanager
async def _watched(transport: AbstractAsyncContextManager[Any], gone: asyncio.Event) -> Any:
    """The transport's streams, with `gone` set when the server's side ends (a stdio child
    that exited, an HTTP stream that closed): the supervisor then starts it again."""
    async with transport as (read, write):
        sender, receiver = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            try:
                async with sender:
                    async for item in read:
                        await sender.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                gone.set()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield receiver, write
            finally:
                group.cancel_scope.cancel()
                receiver.close()


async def _read_tools(client: Client) -> tuple[ListedTool, ...]:
    tools: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        for tool in page.tools:
            tools.append(
                ListedTool(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=json.loads(json.dumps(tool.input_schema)),
                )
            )
        cursor = page.next_cursor
        if cursor is None or len(tools) >= MAX_TOOLS:
            break
    return tuple(tools[:MAX_TOOLS])


def _result(result: mcp_types.CallToolResult) -> McpResult:
    blocks: list[McpContent] = []
    for block in result.content:
        match block:
            case mcp_types.TextContent():
                blocks.append(McpContent(kind="text", text=block.text))
            case mcp_types.ImageContent():
                data = _bytes(block.data)
                blocks.append(
                    McpContent(
                        kind="image",
                        mime_type=block.mime_type,
                        size=len(data) if data is not None else len(block.data),
                        data=data if data is not None and len(data) <= MAX_IMAGE_BYTES else b"",
                    )
                )
            case mcp_types.AudioContent():
                blocks.append(
                    McpContent(
                        kind=block.type, mime_type=block.mime_type, size=_decoded(block.data)
                    )
                )
            case mcp_types.EmbeddedResource():
                inner = block.resource
                if isinstance(inner, mcp_types.TextResourceContents):
                    text = inner.text
                else:
                    text = f"[resource {inner.uri}, {inner.mime_type or 'binary'}]"
                blocks.append(McpContent(kind="resource", text=text))
            case mcp_types.ResourceLink():
                blocks.append(McpContent(kind="resource", text=f"[resource {block.uri}]"))
    structured = None
    if result.structured_content is not None:
        structured = json.dumps(result.structured_content, ensure_ascii=False)
    return McpResult(content=tuple(blocks), is_error=result.is_error, structured=structured)


def _bytes(data: str) -> bytes | None:
    """An image block's bytes (base64 in the protocol); None when they do not decode."""
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None


def _decoded(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _reason(exc: BaseException) -> str:
    """The first error an exception group (the SDK's task groups) wraps, named."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class McpServers:
    """Every configured server; satisfies `bot.tools.mcp.McpCalls`."""

    def __init__(self, configs: Sequence[ServerConfig]) -> None:
        self.servers = {config.name: McpServer(config) for config in configs}

    async def start(self, *, wait_seconds: float = CONNECT_TIMEOUT_SECONDS) -> None:
        """Start every server and wait for each one's first attempt (in parallel)."""
        for server in self.servers.values():
            server.start()
        await asyncio.gather(*(s.first_attempt(wait_seconds) for s in self.servers.values()))

    async def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], *, within: float
    ) -> McpResult:
        found = self.servers.get(server)
        if found is None:
            raise ToolError(f"there is no MCP server {server!r}", code="unknown_tool")
        return await found.call_tool(tool, arguments, within)

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.servers.values()))
