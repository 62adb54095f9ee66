"""Tools from MCP servers as the model sees and runs them (docs/architecture.md, Tools from
MCP servers).

A server's tools are read once when it starts, named `<server>__<tool>`, sorted and frozen:
the tool schemas open every cached prefix, so a server that changes its list mid-run changes
nothing the model is sent until the bot restarts or `tgbot mcp reload`. They are offered per
scene (the same list for every chat of a scene) and checked when they run: a chat or a member
that may not use them gets a tool error, as the bot's own tools do (`bot.tools.rights`).

Nothing here imports the MCP SDK: the adapter (`adapters/mcp`) satisfies `McpCalls`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bot.context.escaping import escape_member_text
from bot.context.images import bounds_for, data_url, image_tokens_for
from bot.domain.ids import Scene
from bot.domain.messages import ImagePart
from bot.errors import MediaRefused, ToolError
from bot.ports import ToolSpec
from bot.redact import scrub
from bot.tools.base import Tool, ToolContext

SEPARATOR = "__"
REFERENCE_KEYWORD = "x-message-reference"
"""A property of a tool's input schema marked `"x-message-reference": true` takes an alias."""
MAX_NAME_CHARS = 64
"""Providers take tool names of at most 64 characters of A-Z, a-z, 0-9, _ and -."""
MAX_DESCRIPTION_CHARS = 1_024
MAX_RESULT_CHARS = 200_000
"""What a result is read up to before the record-time cap shortens it further."""
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

Members = Literal["anyone", "admins", "owner"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedTool:
    """One tool as its server listed it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpContent:
    """One block of a tool's result: text, or what stands for an image, audio or resource."""

    kind: Literal["text", "image", "audio", "resource"]
    text: str = ""
    mime_type: str = ""
    size: int = 0
    """Bytes of an image or audio block."""
    data: bytes = b""
    """An image block's bytes (empty when too large to keep): shown to a model that sees."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpResult:
    content: tuple[McpContent, ...]
    is_error: bool = False
    structured: str | None = None
    """`structuredContent` as JSON, shown when the result has no text."""


class McpCalls(Protocol):
    """Calls into running MCP servers (`adapters.mcp.McpServers`). A server that is down or
    does not answer raises `ToolError`."""

    async def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], *, within: float
    ) -> McpResult: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class McpAccess:
    """Where and for whom a server's tools run: chats of `scenes` or the chats in `chats`
    (both empty: the owner's private chat only), asked by `members`."""

    scenes: frozenset[Scene] = frozenset()
    chats: frozenset[int] = frozenset()
    members: Members = "owner"
    owner_id: int | None = None

    @property
    def allowed_scenes(self) -> frozenset[Scene]:
        if not self.scenes and not self.chats:
            return frozenset({"owner"})
        return self.scenes

    @property
    def offered_scenes(self) -> frozenset[Scene]:
        """The scenes whose requests list the tools: every chat of a scene sees one list."""
        return self.allowed_scenes | {self._scene_of(chat) for chat in self.chats}

    def _scene_of(self, chat_id: int) -> Scene:
        if chat_id < 0:
            return "group"
        return "owner" if chat_id == self.owner_id else "private"

    async def check(self, server: str, ctx: ToolContext) -> None:
        """Raise `ToolError` ("not allowed: …") unless this chat and member may run it."""
        if ctx.scene not in self.allowed_scenes and ctx.chat_id not in self.chats:
            raise ToolError(
                f"not allowed: the tools of {server!r} are not enabled in this chat",
                code="not_allowed",
            )
        if self.members == "anyone":
            return
        rights = ctx.rights
        requester = None if rights is None else rights.requester_id
        if requester is not None and requester == self.owner_id:
            return
        if (
            self.members == "admins"
            and rights is not None
            and await rights.requester_privileged(ctx.chat_id)
        ):
            return
        who = "the bot's owner" if self.members == "owner" else "the owner or a chat administrator"
        raise ToolError(
            f"not allowed: only {who} may have the bot use the tools of {server!r}",
            code="not_allowed",
        )


def server_tools(
    server: str,
    listed: Sequence[ListedTool],
    *,
    calls: McpCalls,
    access: McpAccess,
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    reference_params: Sequence[str] = (),
    timeout_seconds: float = 30.0,
) -> tuple[Tool, ...]:
    """The server's tools as the bot offers them: filtered by `allow`/`deny`, named
    `<server>__<tool>`, sorted by that name. A name that two tools share once made safe for
    providers keeps its first (in the server's order)."""
    chosen: dict[str, Tool] = {}
    for item in listed:
        if (allow and item.name not in allow) or item.name in deny:
            continue
        name = offered_name(server, item.name)
        if name in chosen:
            continue
        chosen[name] = _tool(
            server,
            item,
            name=name,
            calls=calls,
            access=access,
            reference_params=reference_params,
            timeout=timeout_seconds,
        )
    return tuple(chosen[name] for name in sorted(chosen))


def server_of(name: str) -> str:
    """The MCP server a tool name belongs to (`time` of `time__get_current_time`); "" for
    the bot's own tools, whose names never hold `__`."""
    server, separator, _ = name.partition(SEPARATOR)
    return server if separator else ""


def offered_name(server: str, tool: str) -> str:
    """`<server>__<tool>`, made of the characters providers take, at most 64 of them."""
    return _NAME_UNSAFE.sub("_", f"{server}{SEPARATOR}{tool}")[:MAX_NAME_CHARS]


def _tool(
    server: str,
    item: ListedTool,
    *,
    name: str,
    calls: McpCalls,
    access: McpAccess,
    reference_params: Sequence[str],
    timeout: float,
) -> Tool:
    parameters, marked = _parameters(item.input_schema, reference_params)
    description = " ".join(item.description.split())[:MAX_DESCRIPTION_CHARS]
    spec = ToolSpec(
        name=name,
        description=f"[{server}] {description}" if description else f"[{server}] {item.name}",
        parameters=parameters,
    )
    types = _declared_types(parameters, marked)

    async def run(args: Mapping[str, Any], ctx: ToolContext) -> str:
        await access.check(server, ctx)
        arguments = {
            key: _as_declared(value, types.get(key)) if key in marked else value
            for key, value in args.items()
        }
        result = await calls.call_tool(server, item.name, arguments, within=timeout)
        shown = await show_images(result, ctx, label=name)
        # a server that echoes its env or headers: the model, the log and the trace see
        # `[redacted]` (the app registers those values as secrets)
        text = scrub(render_result(result, shown=shown))
        if result.is_error:
            raise ToolError(text or "the server reported an error", code="server_error")
        return text

    return Tool(
        spec=spec,
        run=run,
        summary=f"{name}: {description[:100]}" if description else "",
        scenes=access.offered_scenes,
        reference_params=marked,
        timeout_seconds=timeout,
        origin=server,
    )


def _parameters(
    schema: Mapping[str, Any], configured: Sequence[str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """A private copy of the input schema as the model sees it, and the names of the
    arguments that take a message reference (configured, or marked in the schema): the
    marker keyword is taken out (providers may refuse unknown keywords) and the property's
    description says it takes an alias."""
    parameters: dict[str, Any] = copy.deepcopy(dict(schema)) or {"type": "object"}
    parameters.setdefault("type", "object")
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        return parameters, frozenset()
    marked: set[str] = set()
    for key, prop in properties.items():
        if not isinstance(prop, dict):
            continue
        flagged = bool(prop.pop(REFERENCE_KEYWORD, False))
        items = prop.get("items")
        if isinstance(items, dict):
            flagged = bool(items.pop(REFERENCE_KEYWORD, False)) or flagged
        if flagged or key in configured:
            marked.add(key)
            hint = "A message alias you were shown (m12)."
            prop["description"] = f"{prop.get('description', '')} {hint}".strip()
    return parameters, frozenset(marked)


def _declared_types(parameters: Mapping[str, Any], marked: frozenset[str]) -> dict[str, str]:
    properties = parameters.get("properties", {})
    found: dict[str, str] = {}
    for key in marked:
        prop = properties.get(key, {})
        kind = prop.get("type")
        if kind == "array" and isinstance(prop.get("items"), dict):
            kind = prop["items"].get("type")
        if isinstance(kind, str):
            found[key] = kind
    return found


def _as_declared(value: Any, kind: str | None) -> Any:
    """A rewritten platform id in the type the server declared (a string when it asks for
    one)."""
    if isinstance(value, list):
        return [_as_declared(item, kind) for item in value]
    if kind == "string" and isinstance(value, int):
        return str(value)
    return value


async def show_images(result: McpResult, ctx: ToolContext, *, label: str) -> dict[int, str]:
    """Put the result's images on this turn's request when the route's model sees (as
    `view_image` does: checked and downscaled like a member's file, never stored; the runner
    notes "attached" on the result). Returns why an image was not shown, by block index."""
    media = ctx.media
    said: dict[int, str] = {}
    if media is None or not media.vision or media.files is None:
        return said
    for index, block in enumerate(result.content):
        if block.kind != "image" or not block.data:
            continue
        try:
            image = await media.files.prepare(block.data, bounds_for(media.wire))
        except MediaRefused as refused:
            said[index] = f"not shown: {refused.reason}"
            continue
        media.shown.append(
            ImagePart(
                url=data_url(image.media_type, image.data),
                width=image.width,
                height=image.height,
                tokens=image_tokens_for(media.wire, image.width, image.height),
                label=label,
            )
        )
    return said


def render_result(result: McpResult, *, shown: Mapping[int, str] | None = None) -> str:
    """The result as the model reads it: text blocks escaped like member text (a line that
    opens like one of our blocks, `[quote …]`, `[Turn context]`, `[id:…]` or a look-alike,
    gets a backslash), an image, audio or a
    resource as one line saying what it was (and, for an image a seeing model was not shown,
    why: `shown`), `structuredContent` when there is nothing else; read up to
    `MAX_RESULT_CHARS`."""
    parts: list[str] = []
    size = 0
    for index, block in enumerate(result.content):
        match block.kind:
            case "text":  # the server's words: escaped like a member's (bot.context.escaping)
                part = escape_member_text(block.text)
            case "image" | "audio":
                part = f"[{block.kind} {block.mime_type or 'unknown type'}, {_size(block.size)}"
                said = (shown or {}).get(index)
                part += f": {said}]" if said else "]"
            case "resource":
                part = escape_member_text(block.text)
        parts.append(part)
        size += len(part)
        if size >= MAX_RESULT_CHARS:
            break
    if not any(p.strip() for p in parts) and result.structured is not None:
        parts = [escape_member_text(result.structured)]
    return "\n".join(parts)[:MAX_RESULT_CHARS]


def _size(count: int) -> str:
    return f"{count} bytes" if count < 1024 else f"{count / 1024:.1f} KB"


def tools_digest(tools: Sequence[Tool]) -> str:
    """One line per tool, its schema as the model sees it: what `tgbot mcp reload` compares."""
    return "\n".join(
        json.dumps(
            {**t.spec.schema(), "scenes": sorted(t.scenes or ())},
            ensure_ascii=False,
            sort_keys=True,
        )
        for t in tools
    )
