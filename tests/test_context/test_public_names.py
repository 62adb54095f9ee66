"""The names other code is promised from `bot.context` itself (the pure core's contract)."""

from __future__ import annotations

import bot.context
from bot.context.history_trim import BREADCRUMB_TEXT, insert_breadcrumb, trim_to_recent_turns
from bot.context.tokens import estimate_history_tokens, estimate_text_tokens
from bot.context.tool_results import truncate_tool_result
from bot.context.turn_cap import trim_conversation_to_recent_turns, trim_to_recent_turn_count
from bot.context.turns import remove_orphaned_tool_messages
from bot.context.window import RuntimeLimits, effective_context_budget
from bot.domain.messages import ChatMessage, ToolCall

PROMISED = {
    "BREADCRUMB_TEXT": BREADCRUMB_TEXT,
    "ChatMessage": ChatMessage,
    "RuntimeLimits": RuntimeLimits,
    "ToolCall": ToolCall,
    "effective_context_budget": effective_context_budget,
    "estimate_history_tokens": estimate_history_tokens,
    "estimate_text_tokens": estimate_text_tokens,
    "insert_breadcrumb": insert_breadcrumb,
    "remove_orphaned_tool_messages": remove_orphaned_tool_messages,
    "trim_conversation_to_recent_turns": trim_conversation_to_recent_turns,
    "trim_to_recent_turn_count": trim_to_recent_turn_count,
    "trim_to_recent_turns": trim_to_recent_turns,
    "truncate_tool_result": truncate_tool_result,
}


def test_the_package_exports_exactly_the_promised_names_from_their_modules() -> None:
    assert sorted(bot.context.__all__) == sorted(PROMISED)
    assert {name: getattr(bot.context, name) for name in PROMISED} == PROMISED
    assert BREADCRUMB_TEXT == "[earlier turns omitted to fit the context window]"
