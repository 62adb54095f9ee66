"""Turn grouping: a turn starts at a real user message and runs to the next one.

Not a turn start: system messages, the breadcrumb (by its flag, never its text), a user
message whose text starts exactly with `[Tool results]` (prompt-mode tool results belong to
the previous turn), and a user message merged into the previous turn (`continues_turn`).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.domain.messages import ChatMessage

TOOL_RESULTS_PREFIX = "[Tool results]"


def is_turn_start(message: ChatMessage) -> bool:
    return (
        message.role == "user"
        and not message.is_breadcrumb
        and not message.continues_turn
        and not message.content.startswith(TOOL_RESULTS_PREFIX)
    )


def leading_system_count(messages: Sequence[ChatMessage]) -> int:
    """How many system messages open the list."""
    count = 0
    for message in messages:
        if message.role != "system":
            break
        count += 1
    return count


def turn_starts(messages: Sequence[ChatMessage], begin: int = 0) -> list[int]:
    """Indexes (from `begin`) where turns start. Messages before the first start, if any,
    are an orphan prefix that belongs to no turn."""
    return [i for i in range(begin, len(messages)) if is_turn_start(messages[i])]


def count_turns(messages: Sequence[ChatMessage], begin: int = 0) -> int:
    """How many turns start at or after `begin`."""
    return sum(1 for i in range(begin, len(messages)) if is_turn_start(messages[i]))
