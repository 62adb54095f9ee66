"""What a tool is: a spec the model sees and an async function over platform ids.

Tools never see message aliases: the runtime rewrites them to platform ids first. A tool
reports failure by raising `ToolError` (or a `TelegramError`); the runtime turns either into
a tool result the model reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Any

from bot.context.alias_table import AliasTable
from bot.context.images import ImageWire
from bot.context.memory_block import MemoryLimits
from bot.context.tool_results import DEFAULT_MAX_TOOL_RESULT_CHARS
from bot.domain.ids import Scene
from bot.domain.messages import ImagePart, ToolCall
from bot.domain.records import StoredRecord, ToolResult
from bot.errors import ToolError
from bot.ports import Clock, MediaFiles, Messenger, RecordedBubbles, ToolSpec
from bot.store_ports import HistorySearch, HistoryStore, MemoryFacts, PlatformMessages
from bot.tools.rights import MemberRights


class ShownByTool:
    """What one tool call shows, as the tool registers it: into the turn's table, and kept
    for the call's result record (`ToolResult.shown`), so a later turn that still shows the
    result accepts them too."""

    __slots__ = ("aliases", "carried", "references", "turn")

    def __init__(self, turn: AliasTable) -> None:
        self.turn = turn
        self.aliases: list[tuple[str, int]] = []
        self.references: list[int] = []
        self.carried: list[int] = []
        """Platform ids whose content the result carries (`ToolResult.content_of`)."""

    def carry(self, message_id: int) -> None:
        """The result carries the content of `message_id` (a file's text, an image): its
        words go when that message is deleted."""
        self.carried.append(message_id)

    def register(self, alias: str, message_id: int) -> None:
        self.turn.register(alias, message_id)
        self.aliases.append((alias, message_id))

    def register_reference(self, message_id: int) -> None:
        self.turn.register_reference(message_id)
        self.references.append(message_id)

    def alias_of(self, message_id: int) -> str | None:
        return self.turn.alias_of(message_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Where a tool acts: the current chat only, with the turn's loaded records."""

    chat_id: int
    thread_id: int
    bot_id: int | None
    bot_name: str = ""
    clock: Clock
    messenger: Messenger
    platform_messages: PlatformMessages
    records: Sequence[StoredRecord] = ()
    record_bubbles: RecordedBubbles | None = None
    rights: MemberRights | None = None
    """The rights of the member who triggered the turn; None: only the bot's own rights
    (a tool that needs a member's rights refuses)."""
    session_id: int = 0
    zone: tzinfo = UTC
    search: HistorySearch | None = None
    history: HistoryStore | None = None
    """Aliases of messages beyond the window (`find_aliases`), for what a tool shows."""
    shown: AliasTable | ShownByTool | None = None
    """The turn's alias table: a tool that shows messages adds their aliases to it."""
    scene: Scene = "private"
    """The scene of the turn's chat (a tool offered per scene checks it when it runs)."""
    media: ToolMedia | None = None
    """Members' files, and where a tool puts an image for the model (`view_image`)."""
    eraser: PlatformMessages | None = None
    """Forgets a message the tool deleted (its content leaves storage and the index)."""
    erased: set[int] = field(default_factory=set)
    """Platform ids a tool deleted in this turn: the runtime renders them `[deleted]` in the
    turn's next calls too."""
    memory: MemoryFacts | None = None
    """The facts `remember` and `forget` keep and drop (None: memory is off)."""
    memory_limits: MemoryLimits = field(default_factory=MemoryLimits)
    forgotten: set[int] = field(default_factory=set)
    """Fact ids `forget` deleted in this turn: the runtime drops them from the turn's
    `[Memory]` block for its next calls."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMedia:
    """Members' files for tools: `files` fetches them; `wire` and `vision` are the turn's
    route's; `shown` collects the images one call returns (the runner gives each call its
    own list and puts them on that call's result, for this turn only)."""

    files: MediaFiles | None
    wire: ImageWire = "openai"
    vision: bool = False
    max_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS
    """The record-time cap a document's text is fitted under."""
    shown: list[ImagePart] = field(default_factory=list)


GONE_WORDS = ("message to delete not found", "message to react not found", "message_id_invalid")
"""How Telegram says (Bad Request) that a message is not in the chat any more."""


def says_gone(exc: BaseException) -> bool:
    """Whether a Bot API refusal says the message is gone from the chat."""
    words = str(exc).lower()
    return any(gone in words for gone in GONE_WORDS)


async def forget_deleted(ctx: ToolContext, message_id: int) -> None:
    """The message is gone from the chat: its content leaves storage and the search index,
    and this turn's next calls show it `[deleted]`."""
    if ctx.eraser is not None:
        await ctx.eraser.erase_message(ctx.chat_id, message_id)
    ctx.erased.add(message_id)


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
    stored_call: Callable[[ToolCall, ToolResult], ToolCall] | None = None
    """The call as stored and replayed, given its result (None: as the model wrote it):
    `remember` keeps the fact's id there, never its text, so a forgotten fact leaves no
    copy in later requests."""


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
