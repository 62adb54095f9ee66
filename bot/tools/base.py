"""What a tool is: a spec the model sees and an async function over platform ids.

Tools never see message aliases: the runtime rewrites them to platform ids first. A tool
reports failure by raising `ToolError` (or a `TelegramError`); the runtime turns either into
a tool result the model reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any

from bot.context.alias_table import AliasTable, ShownByTool
from bot.domain.ids import Scene
from bot.domain.records import StoredRecord
from bot.errors import ToolError
from bot.ports import Clock, Messenger, RecordedBubbles, ToolSpec
from bot.store_ports import AliasLookup, HistorySearch, PlatformMessageLookup
from bot.tools.rights import MemberRights


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Where a tool acts: the current chat only, with the turn's loaded records."""

    chat_id: int
    thread_id: int
    bot_id: int | None
    bot_name: str = ""
    clock: Clock
    messenger: Messenger
    platform_messages: PlatformMessageLookup
    records: Sequence[StoredRecord] = ()
    record_bubbles: RecordedBubbles | None = None
    rights: MemberRights | None = None
    """The rights of the member who triggered the turn; None: only the bot's own rights
    (a tool that needs a member's rights refuses)."""
    session_id: int = 0
    zone: tzinfo = UTC
    search: HistorySearch | None = None
    history: AliasLookup | None = None
    """Aliases of messages beyond the window (`find_aliases`), for what a tool shows."""
    shown: AliasTable | ShownByTool | None = None
    """The turn's alias table: a tool that shows messages adds their aliases to it."""
    scene: Scene = "private"
    """The scene of the turn's chat (a tool offered per scene checks it when it runs)."""


ToolFunction = Callable[[Mapping[str, Any], ToolContext], Awaitable[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    spec: ToolSpec
    run: ToolFunction
    summary: str = ""
    """One line for the per-turn tool index."""
    scenes: frozenset[Scene] | None = None
    """The scenes whose requests offer this tool; None: every scene. The tool list is the
    same for every chat of a scene, so the cached prefix holds."""
    reference_params: frozenset[str] | None = None
    """Argument names rewritten from message aliases to platform ids before the tool runs;
    None: the runtime's naming rule (`message_id`, `*_message_id`, `reference`…)."""
    timeout_seconds: float | None = None
    """How long one call may take; None: the runtime's default."""
    origin: str = ""
    """Where the tool lives when it is not the bot's own: the MCP server's name."""


def offered_in(tools: Mapping[str, Tool], scene: Scene) -> dict[str, Tool]:
    """The tools a request in `scene` offers, in table order (the same for every chat of
    the scene: the tool schemas and the index open the cached prefix)."""
    return {
        name: tool for name, tool in tools.items() if tool.scenes is None or scene in tool.scenes
    }


def require_int(args: Mapping[str, Any], name: str) -> int:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"argument {name!r} must be a message reference", code="bad_arguments")
    return value


def require_str(args: Mapping[str, Any], name: str, *, max_len: int = 4096 * 4) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"argument {name!r} must be a non-empty string", code="bad_arguments")
    if len(value) > max_len:
        raise ToolError(f"argument {name!r} is longer than {max_len} characters", code="too_long")
    return value
