"""Frozen value objects shared by every layer: ids, inbound facts and conversation records."""

from bot.domain.facts import Forward, InboundMessage, Media, MediaKind, Quote, Sender, SenderKind
from bot.domain.ids import Scene, SessionKey
from bot.domain.messages import ChatMessage, Role, ToolCall
from bot.domain.records import (
    AssistantRecord,
    ContentBlock,
    RecordBody,
    RecordKind,
    ServiceMessageRecord,
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
    "ServiceMessageRecord",
    "SessionKey",
    "StoredRecord",
    "SummaryRecord",
    "ToolCall",
    "ToolResult",
    "ToolResultsRecord",
    "UserRecord",
]
