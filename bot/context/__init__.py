"""The functional core: pure, synchronous functions deciding what history the model is sent.

The package itself re-exports only the names other code is promised (the trimming
primitives, the estimate and the runtime budget); everything else is imported from the
module that holds it.
"""

from bot.context.history_trim import BREADCRUMB_TEXT, insert_breadcrumb, trim_to_recent_turns
from bot.context.tokens import estimate_history_tokens, estimate_text_tokens
from bot.context.tool_results import truncate_tool_result
from bot.context.turn_cap import trim_conversation_to_recent_turns, trim_to_recent_turn_count
from bot.context.turns import remove_orphaned_tool_messages
from bot.context.window import RuntimeLimits, effective_context_budget
from bot.domain.messages import ChatMessage, ToolCall

__all__ = [
    "BREADCRUMB_TEXT",
    "ChatMessage",
    "RuntimeLimits",
    "ToolCall",
    "effective_context_budget",
    "estimate_history_tokens",
    "estimate_text_tokens",
    "insert_breadcrumb",
    "remove_orphaned_tool_messages",
    "trim_conversation_to_recent_turns",
    "trim_to_recent_turn_count",
    "trim_to_recent_turns",
    "truncate_tool_result",
]
