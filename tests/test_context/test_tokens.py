from __future__ import annotations

import pytest

from bot.context.tokens import (
    IMAGE_TOKEN_ESTIMATE,
    estimate_message_tokens,
    estimate_span_tokens,
    estimate_text_tokens,
)
from bot.domain.messages import ChatMessage, ToolCall


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("hello world!", 3),
        ("hello world!!", 4),
        ("你好", 2),
        ("你好ab", 3),
        ("ｈｉ", 2),
    ],
    ids=["empty", "one char", "12 ascii", "13 ascii", "cjk", "mixed", "fullwidth"],
)
def test_estimate_text_tokens(text: str, tokens: int) -> None:
    assert estimate_text_tokens(text) == tokens


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        (ChatMessage(role="user", content="hello world!"), 7),
        (
            ChatMessage(
                role="assistant", tool_calls=(ToolCall(id="1", name="find", arguments='{"q":1}'),)
            ),
            7,
        ),
        (ChatMessage(role="user", content="see", images=("a", "b")), 5 + 2 * IMAGE_TOKEN_ESTIMATE),
        (ChatMessage(role="user", content="hello world!", tokens=40), 40),
    ],
    ids=["text + 4", "call name and arguments", "dispatched images", "cached value wins"],
)
def test_estimate_message_tokens(message: ChatMessage, tokens: int) -> None:
    assert estimate_message_tokens(message) == tokens


def test_estimate_span_tokens_reads_cached_costs() -> None:
    messages = [
        ChatMessage(role="user", content="hello world!"),
        ChatMessage(role="user", content="hello world!", tokens=1),
        ChatMessage(role="user", content="hello world!"),
    ]
    assert estimate_span_tokens(messages, 0, 3) == 15
    assert estimate_span_tokens(messages, 1, 2) == 1
    assert estimate_span_tokens(messages, 2, 2) == 0
