from __future__ import annotations

import pytest

from bot.context.history_trim import BREADCRUMB_TEXT
from bot.context.turns import count_turns, is_turn_start
from bot.domain.messages import ChatMessage
from tests.test_context.histories import assistant, crumb, prompt_results, system, tool, user


@pytest.mark.parametrize(
    ("message", "starts"),
    [
        (user(), True),
        (user(BREADCRUMB_TEXT), True),
        (crumb(), False),
        (user(merged=True), False),
        (prompt_results(), False),
        (user(" [Tool results] typed with a space"), True),
        (system(), False),
        (assistant(), False),
        (tool("a"), False),
    ],
    ids=[
        "user",
        "crumb text without the flag",
        "flagged crumb",
        "merged burst",
        "prompt-mode results",
        "prefix not at the very start",
        "system",
        "assistant",
        "tool",
    ],
)
def test_is_turn_start(message: ChatMessage, starts: bool) -> None:
    assert is_turn_start(message) is starts


def test_count_turns_from_an_offset() -> None:
    messages = [system(), user(), assistant(), user(), user(merged=True), prompt_results()]
    assert count_turns(messages) == 2
    assert count_turns(messages, 2) == 1
    assert count_turns(messages, 6) == 0
