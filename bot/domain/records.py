"""Conversation records: what a session stores, one node of the session tree each.

A record body is a closed union discriminated by `kind`. Bodies hold conversation only:
per-turn context is never stored (legacy rows, marked `UserRecord.legacy`, may still carry
it, and projection strips it from them only). `StoredRecord` wraps a body with its tree
position, its platform message ids and the runtime-only alias fields attached on load.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot.domain.facts import Forward, Media, Quote, Sender
from bot.domain.messages import Reasoning, ToolCall

RecordKind = Literal["user", "assistant", "tool_results", "event", "summary"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentBlock:
    """One block of a legacy user message: plain text, or a context reference with a key."""

    type: Literal["text", "contextRef"]
    text: str = ""
    key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord:
    """A member's message. `merged` marks a burst message that shares the previous turn."""

    kind: Literal["user"] = "user"
    sender: Sender
    text: str = ""
    media: tuple[Media, ...] = ()
    quote: Quote | None = None
    forward: Forward | None = None
    merged: bool = False
    album: str | None = None
    """The media group (`media_group_id`) the message is one part of."""
    linked_channel: bool = False
    """An automatic forward of the linked channel's post."""
    paid_stars: int | None = None
    """The Telegram Stars the sender paid to send it (`paid_star_count`)."""
    refused: bool = False
    """The rate limit refused it: stored like every message, never answered (not by crash
    recovery either)."""
    deleted: bool = False
    """The message was deleted in the chat: its content is gone (`bot.domain.erasure`)."""
    blocks: tuple[ContentBlock, ...] = ()
    """Legacy rows only: the original blocks, stripped of per-turn ones at projection."""
    legacy: bool = False
    """Stored before conversation-only storage (marked by `tgbot import-legacy`): only
    such rows may carry per-turn blocks or a `[Tool results]` carrier, so only they are
    stripped or read as one. A member's own text is never stripped."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantRecord:
    """The bot's reply text and/or the tool calls it made, with the reasoning that led to
    them (kept to be sent back where the provider requires it, never shown)."""

    kind: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: Reasoning | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The result of one tool call; `content` is whole (truncated only at record time)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    error_code: str | None = None
    shown: tuple[tuple[str, int], ...] = ()
    """The `(alias, platform id)` pairs the result showed (search_history's hits), so they
    join the alias table of a later turn that still shows this result."""
    shown_references: tuple[int, ...] = ()
    """Platform ids the result showed without an alias (a message off the active path)."""
    content_of: tuple[int, ...] = ()
    """Platform ids whose content the result carries (read_document's file, view_image's
    image): deleting one of them deletes the result's words (`bot.domain.erasure`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultsRecord:
    """The results of the calls of the preceding assistant record, committed together."""

    kind: Literal["tool_results"] = "tool_results"
    results: tuple[ToolResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceMessageRecord:
    """A chat event (member joined, title changed, pin…) described in one line."""

    kind: Literal["event"] = "event"
    text: str
    actor: Sender | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRecord:
    """A compaction summary standing in for earlier turns (docs/context-window.md, The summary).

    Stored off the active path, as a child of the last record it covers, so a branch uses
    the summary of its own path. `first_alias`–`last_alias` name the range it covers;
    `aliases` are the `(alias, platform id)` pairs of messages the text mentions (they join
    the turn's alias table). Older rows hold only `text`.
    """

    kind: Literal["summary"] = "summary"
    text: str
    first_alias: str = ""
    last_alias: str = ""
    aliases: tuple[tuple[str, int], ...] = ()


RecordBody = UserRecord | AssistantRecord | ToolResultsRecord | ServiceMessageRecord | SummaryRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRecord:
    """A record as stored: tree position, time, platform ids, body, and runtime alias fields.

    `message_ids` holds one slot per platform message the record produced, in delivery
    order; `None` marks a slot whose delivery was not confirmed. `tokens` is the token
    estimate of the body, computed once at record time. `alias_seq` and `alias_parts`
    are runtime-only (attached on load, never saved): `alias_parts[i]` is the alias of
    slot i (`"m7"`, `"m7.3"`) or `None` for an unconfirmed slot.
    """

    id: int
    session_id: int
    parent_id: int | None
    created_at: datetime
    body: RecordBody
    message_ids: tuple[int | None, ...] = ()
    tokens: int = 0
    alias_seq: int | None = None
    alias_parts: tuple[str | None, ...] = ()

    @property
    def kind(self) -> RecordKind:
        return self.body.kind

    @property
    def message_id(self) -> int | None:
        """The first confirmed platform message id (`messageId` in the payload)."""
        for mid in self.message_ids:
            if mid is not None:
                return mid
        return None
