"""The Protocols the core needs from the outside world, with the value objects they carry.

Adapters satisfy them structurally; fakes in tests implement the same Protocols. Every port
is owned by the code that uses it (the agent runtime, the services, the tools) and is no
wider than what that code calls. The store's ports (one per role: sessions, history,
platform messages, ...) are in `bot.store_ports`; the values they carry are here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from bot.context.images import ImageBounds
from bot.context.tokens import TokenCorrection
from bot.domain.facts import InboundMessage, Media, MembershipChange, ReactionChange
from bot.domain.ids import Scene, SessionKey
from bot.domain.messages import CachePlan, ChatMessage, Reasoning, ToolCall
from bot.domain.platform_messages import Delivery, PlatformMessage
from bot.domain.records import RecordBody, StoredRecord

# ---------------------------------------------------------------- time


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...


# ---------------------------------------------------------------- storage


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """A stored session. `window_start_id` is the first record of the history window."""

    id: int
    key: SessionKey
    scene: Scene
    title: str | None = None
    active_leaf_id: int | None = None
    window_start_id: int | None = None
    route: str | None = None
    closed: bool = False
    """The bot was removed or kicked from the chat: nothing more is sent there."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRecord:
    """A record to append. `tokens` is the body's estimate, computed by the caller once."""

    body: RecordBody
    created_at: datetime
    message_ids: tuple[int | None, ...] = ()
    tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedHistory:
    """What the next model call needs from storage.

    `records` is the tail of the active path, oldest first, starting at the session's
    window start (or at the newest `max_records` when the window start is older), each with
    `alias_seq` / `alias_parts` attached. `has_earlier` says records exist before it.
    `next_alias_seq` is the ordinal the next new platform message will get.
    """

    session: SessionInfo
    records: tuple[StoredRecord, ...]
    has_earlier: bool
    next_alias_seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequest:
    """A session to open (or find): what `SessionStore.open_session` takes."""

    key: SessionKey
    scene: Scene
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundAppend:
    """One new inbound message to store: its record, appended after the session's active
    leaf (which moves to it), and its platform message (the de-duplication key)."""

    session_id: int
    record: NewRecord
    platform_message: PlatformMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredReaction:
    """One reaction a member put on one of the bot's messages (`emoji` as the adapter
    labels it: an emoji, `custom_emoji:<id>` or `paid`)."""

    chat_id: int
    thread_id: int = 0
    message_id: int
    user_id: int
    user_name: str = ""
    emoji: str
    created_at: datetime


# ---------------------------------------------------------------- model provider


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def schema(self) -> dict[str, object]:
        """The tool as it is costed and sent: name, description and parameters."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


StopReason = Literal["end", "length", "refusal", "tool_calls", "context"]

ReasoningLevel = Literal["auto", "off", "low", "medium", "high", "max"]
"""A profile's `reasoning`: how hard the model thinks (`auto`: the provider decides)."""
OWNED_BODY_KEYS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "stream",
        "system",
        "max_tokens",
        "max_completion_tokens",
    }
)
"""Request fields the bot writes itself: a profile's `extra_body` may not set them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMRequest:
    model: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None
    temperature: float | None = None
    tool_choice: Literal["auto", "none"] | None = None
    """`none`: the tools are shown (the cached prefix holds) but must not be called."""
    cache_plan: CachePlan | None = None
    """Where the next request repeats this one; `None`: nothing is marked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage as billed (docs/architecture.md, Tokens, caches and usage as billed).

    `input_tokens` is the whole billed input: for Anthropic, input + cache reads + cache
    writes. `cached_tokens` (reads) and `cache_write_tokens` (writes) are parts of it.
    """

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    """All cache writes; `cache_write_1h_tokens` is the part written with a 1-hour TTL."""
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    """Part of `output_tokens` the model spent thinking."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResponse:
    """A model's answer. `finish_reason` is the provider's own word; `stop` is what it means
    here (`end`, `length`, `refusal`, `tool_calls`, `context`), `None` when not reported."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    stop: StopReason | None = None
    reasoning: Reasoning | None = None
    refusal: str = ""
    """The provider's refusal text, where it gives one (OpenAI `message.refusal`)."""
    sent: SentBody | None = field(default=None, compare=False, repr=False)
    """The request body exactly as this answer's provider sent it over HTTP, so the call's
    trace keeps those bytes instead of encoding the request a second time (`None`: not sent
    over HTTP, e.g. the scripted model in-process)."""


@dataclass(frozen=True, slots=True)
class SentBody:
    """A JSON request body as sent: `dialect` names its shape (`openai` chat completions,
    `anthropic` Messages)."""

    dialect: str
    body: bytes


TextSink = Callable[[str], Awaitable[None]]
"""Receives the reply's text so far while a provider streams (a live draft's feed)."""


class LLMProvider(Protocol):
    """One chat-completions endpoint. Raises the `ProviderError` branch of `bot.errors`."""

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        """The whole response. With `on_text`, a provider that can stream does, and calls it
        with the text so far as it grows; one that cannot ignores it."""
        ...


# ---------------------------------------------------------------- chat platform


BubbleHook = Callable[[Delivery], Awaitable[None]]
"""Called after each confirmed bubble with the delivery so far (later slots still `None`)."""


class Messenger(Protocol):
    """Outbound actions on the chat platform. Raises the `TelegramError` branch."""

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        """Send `text`, split into bubbles at the platform limit; never raises for a partial.

        `on_bubble` runs after each confirmed bubble, before the next is sent, so a caller
        can store what is confirmed as it happens (a crash mid-reply forgets nothing).
        """
        ...

    async def delete_message(self, chat_id: int, message_id: int) -> None: ...

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None: ...

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        """Whether the member is the chat's creator or one of its administrators, as the
        platform says now (callers cache the answer briefly)."""
        ...

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        """Send a PNG; returns the platform message id."""
        ...


RecordedBubbles = Callable[[Sequence[PlatformMessage]], Awaitable[None]]
"""Called with the platform messages of bubbles a tool delivered, to store them."""


class InboundSink(Protocol):
    """What the Telegram adapter hands parsed updates to (the inbound service)."""

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        """New messages, service events and commands (with `command` set), each chat's in
        message order: a `getUpdates` batch, or one webhook update. The only way in for
        new messages."""
        ...

    async def on_edit(self, message: InboundMessage) -> None:
        """An edited message (`is_edit` is set)."""
        ...


class ChatEventSink(Protocol):
    """What the Telegram adapter hands updates about a chat to (not messages in it)."""

    async def on_membership(self, change: MembershipChange) -> None:
        """The bot was added to a chat, removed or kicked from it, or its rights changed."""
        ...

    async def on_reaction(self, reaction: ReactionChange) -> None:
        """Someone changed their reactions to a message (any message; the sink filters)."""
        ...


# ---------------------------------------------------------------- coordination

LockScope = Literal["store", "turn", "join"]
"""`"store"`: around "is this message new? then append it"; `"turn"`: around running a turn;
`"join"`: held by the worker whose messages wait to join the conversation, while they wait
(see `bot.services.turn_scheduler.LocalChatLock`)."""


class RateLimits(Protocol):
    """Per-user and per-chat budgets of messages that start work, over the last minute.
    `bot.services.guard.LocalRateLimits` counts in this process (SQLite, one worker);
    `storage.rate_limits.SqlRateLimits` in PostgreSQL, shared by every worker. The owner's
    exemption is a rule of the caller, not state kept here."""

    async def take(self, *, user_id: int, chat_id: int) -> bool:
        """Count one message of `user_id` in `chat_id` and say yes when both are within
        their limits; a refused message is not counted against the chat."""
        ...

    async def warn_once(self, chat_id: int) -> bool:
        """Yes at most once per chat a minute (the polite refusal)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ToldNotes:
    """A chat's `[Already told the user]` lines, oldest first; `upto` marks what was read
    (for `SharedToldNotes.confirm`), None when there was nothing."""

    lines: tuple[str, ...]
    upto: int | None


class SharedToldNotes(Protocol):
    """What services sent in a chat outside model turns, kept for the next turn there.
    `bot.services.messenger_relay.ToldUserLog` keeps them in this process (SQLite, one worker);
    `storage.told_notes.SqlToldNotes` in PostgreSQL, seen by every worker."""

    async def note(self, chat_id: int, thread_id: int, line: str) -> None: ...

    async def take(self, chat_id: int, thread_id: int = 0) -> ToldNotes:
        """The newest lines, without forgetting them."""
        ...

    async def confirm(self, chat_id: int, thread_id: int, upto: int) -> None:
        """Forget the lines up to `upto` (the turn that carried them succeeded)."""
        ...


class ToldUserNotes(Protocol):
    """What the bot sent in a chat outside model turns (`bot.services.messenger_relay.ToldUser`:
    in this process, or shared by the workers of one PostgreSQL database)."""

    async def peek(self, chat_id: int, thread_id: int = 0) -> tuple[str, ...]: ...

    async def shown(self, chat_id: int, thread_id: int, lines: Sequence[str]) -> None: ...

    async def note(self, chat_id: int, thread_id: int, text: str) -> None: ...


class SharedTokenCorrections(Protocol):
    """Per-route token corrections kept where every worker's learning meets
    (`storage.token_corrections.SqlTokenCorrections`, PostgreSQL); one process on SQLite
    keeps its JSON file (`bot.agent.metering`)."""

    async def load(self) -> dict[str, TokenCorrection]: ...

    async def publish(self, own: Mapping[str, TokenCorrection]) -> dict[str, TokenCorrection]:
        """Write this worker's state per route (its ratio; samples: the calls it learned
        from itself) and return every route's shared state."""
        ...


class ChatLock(Protocol):
    """Mutual exclusion per (chat, scope), in this process or across workers; `hold` is an
    async context manager. `bot.services.turn_scheduler.LocalChatLock` serves one worker,
    `storage.postgres.locks.AdvisoryChatLock` several on one PostgreSQL database."""

    def hold(
        self, key: SessionKey, *, scope: LockScope = "turn"
    ) -> AbstractAsyncContextManager[None]: ...

    def try_hold(
        self, key: SessionKey, *, scope: LockScope = "turn"
    ) -> AbstractAsyncContextManager[bool]:
        """Hold the lock if nobody does, without waiting; yields whether it is held."""
        ...

    def hold_store(self, key: SessionKey) -> AbstractAsyncContextManager[bool]:
        """Hold the chat's `"store"` lock; yields whether some worker (this one included)
        holds its `"join"` lock, i.e. has messages waiting to join the conversation, which
        every later message of the chat waits behind (found with the lock, no extra trip)."""
        ...

    async def aclose(self) -> None:
        """Release whatever the lock keeps open (connections); holds must have ended."""
        ...


# ---------------------------------------------------------------- outbound pacing

PaceKind = Literal["message", "reaction"]
"""What a paced send puts in a chat: a message (text bubble, photo) counts against the chat's
per-second spacing and a group's per-minute budget; a reaction only against the spacing."""


class SendPacer(Protocol):
    """Telegram's send limits, shared by everything the bot sends (docs/architecture.md,
    Outbound pacing). `bot.services.send_pacing.LocalSendPacer` keeps the budgets in this
    process (SQLite, one worker); `storage.send_pacing.SqlSendPacer` in PostgreSQL, shared by
    every worker. Slots are handed out in the order they are asked for and never refused."""

    async def reserve(self, chat_id: int, kind: PaceKind) -> float:
        """Take the chat's next free slot; the seconds to wait until it (0: send now)."""
        ...

    async def bot_slot(self) -> float:
        """Take a slot of the bot-wide budget, asked right before a send goes; the seconds
        to wait (0: at once)."""
        ...

    async def may_show(self, chat_id: int) -> bool:
        """Whether a chat action or draft may go now (the chat is not paused by a 429);
        never waits and takes no slot: one that would be late is skipped."""
        ...

    async def pause(self, chat_id: int, seconds: float) -> None:
        """Telegram answered 429 with `retry_after=seconds`: nothing more goes to the chat
        until then (from any worker)."""
        ...


# ---------------------------------------------------------------- members' files


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedImage:
    """An image as it is sent: verified, downscaled and encoded again (metadata dropped)."""

    media_type: str
    data: bytes
    width: int
    height: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentText:
    """A document's text as read: `pages` one string per page read (one for a text file),
    `first_page` the number of the first (1-based), `page_count` the PDF's pages (None for
    a text file), `kind` `pdf` or `text`."""

    kind: Literal["pdf", "text"]
    pages: tuple[str, ...]
    first_page: int = 1
    page_count: int | None = None


class MediaFiles(Protocol):
    """Members' files, fetched from the platform through a bounded local cache
    (`adapters.media_files`). Each fails with `MediaRefused` saying why, never hangs."""

    async def image(self, media: Media, bounds: ImageBounds) -> FetchedImage:
        """The image `media` names, within `bounds`."""
        ...

    async def text(self, media: Media, *, page: int | None, max_chars: int) -> DocumentText:
        """The text of the document `media` names: a text file whole, a PDF from `page` (or
        its first) for as many pages as fit `max_chars`."""
        ...

    async def file(self, media: Media) -> bytes:
        """The file `media` names, whole (at most the configured document size)."""
        ...

    async def prepare(self, raw: bytes, bounds: ImageBounds) -> FetchedImage:
        """An image that did not come from the platform (a tool's result), checked and
        downscaled like a member's."""
        ...

    def prefetch(self, media: Media) -> None:
        """Start fetching `media` into the cache in the background (off the chat's lock)."""
        ...


@dataclass(frozen=True, slots=True)
class Transcript:
    """What the endpoint answered: the text, and the audio's length in seconds as the
    endpoint measured (and bills) it; None when its answer did not say."""

    text: str
    seconds: float | None = None


class Transcriber(Protocol):
    """Speech to text (`adapters.transcription`: an OpenAI-compatible endpoint). Fails with
    `MediaRefused` saying why."""

    async def transcribe(self, audio: bytes, *, file_name: str, mime_type: str) -> Transcript: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedTurn:
    """What a turn's preparation reads from storage, in one round trip (`load_turn`).

    `history` is what `load_history` returns. `summaries` are the summary records hanging
    under the record right before the window's oldest record (what precedes the window),
    oldest first: `find_summaries(session, [history.records[0].parent_id])`, or nothing when
    the window starts at the root or is empty. `reactions` are the newest `reactions_limit`
    reactions of the session's chat and thread made after the window's oldest record was
    created, oldest first: `reactions_since(chat, thread, history.records[0].created_at,
    limit=reactions_limit)`, or nothing when the window is empty. A later `since` is a
    filter of these (`created_at > since`, the last `limit`)."""

    history: LoadedHistory
    summaries: tuple[StoredRecord, ...]
    reactions: tuple[StoredReaction, ...]
