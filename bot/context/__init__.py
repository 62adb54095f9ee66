"""The functional core: pure, synchronous functions deciding what history the model is sent."""

from bot.context.budget import (
    ProfileCapacity,
    RuntimeLimits,
    effective_context_budget,
    resolve_window,
    window_for_math,
)
from bot.context.history_trim import (
    BREADCRUMB_TEXT,
    HistoryTrimmed,
    TrimReason,
    TrimResult,
    breadcrumb_message,
    insert_breadcrumb,
    trim_conversation_to_recent_turns,
    trim_to_recent_turn_count,
    trim_to_recent_turns,
    with_breadcrumb,
)
from bot.context.legacy import (
    PER_TURN_PREFIXES,
    PER_TURN_REF_KEYS,
    is_per_turn_block,
    strip_per_turn_blocks,
    strip_per_turn_text,
)
from bot.context.orphans import remove_orphaned_tool_messages
from bot.context.tokens import (
    estimate_history_tokens,
    estimate_message_tokens,
    estimate_text_tokens,
)
from bot.context.tool_results import shrink_old_tool_results, truncate_tool_result
from bot.context.window import (
    WindowDecision,
    WindowLimits,
    check_capacity,
    estimate_tool_schema_tokens,
    recovery_target,
    select_window,
)
from bot.domain.messages import ChatMessage, Role, ToolCall

__all__ = [
    "BREADCRUMB_TEXT",
    "PER_TURN_PREFIXES",
    "PER_TURN_REF_KEYS",
    "ChatMessage",
    "HistoryTrimmed",
    "ProfileCapacity",
    "Role",
    "RuntimeLimits",
    "ToolCall",
    "TrimReason",
    "TrimResult",
    "WindowDecision",
    "WindowLimits",
    "breadcrumb_message",
    "check_capacity",
    "effective_context_budget",
    "estimate_history_tokens",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "estimate_tool_schema_tokens",
    "insert_breadcrumb",
    "is_per_turn_block",
    "recovery_target",
    "remove_orphaned_tool_messages",
    "resolve_window",
    "select_window",
    "shrink_old_tool_results",
    "strip_per_turn_blocks",
    "strip_per_turn_text",
    "trim_conversation_to_recent_turns",
    "trim_to_recent_turn_count",
    "trim_to_recent_turns",
    "truncate_tool_result",
    "window_for_math",
    "with_breadcrumb",
]
