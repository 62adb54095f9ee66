"""Frozen value objects shared by every layer: ids, inbound facts and conversation records."""

from bot.domain.facts import Forward, InboundMessage, Media, MediaKind, Quote, Sender, SenderKind
from bot.domain.ids import Scene, SessionKey
from bot.domain.messages import ChatMessage, Role, ToolCall
from bot.domain.records import (
    AssistantRecord,
    ContentBlock,
    EventRecord,
    RecordBody,
    RecordKind,
    StoredRecord,
    SummaryRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)

__all__ = [
    "AssistantRecord",
    "ChatMessage",
    "ContentBlock",
    "EventRecord",
    "Forward",
    "InboundMessage",
    "Media",
    "MediaKind",
    "Quote",
    "RecordBody",
    "RecordKind",
    "Role",
    "Scene",
    "Sender",
    "SenderKind",
    "SessionKey",
    "StoredRecord",
    "SummaryRecord",
    "ToolCall",
    "ToolResult",
    "ToolResultsRecord",
    "UserRecord",
]
