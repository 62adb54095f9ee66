from __future__ import annotations

import dataclasses

import pytest

from bot.context.tokens import (
    IMAGE_TOKEN_ESTIMATE,
    RequestTokens,
    compute_message_tokens,
    ensure_token_estimate,
    estimate_message_tokens,
    estimate_span_tokens,
    estimate_text_tokens,
    image_tokens,
    split_request_tokens,
    system_tokens,
    with_token_estimate,
)
from bot.domain.messages import ChatMessage, ImagePart, Reasoning, ToolCall


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
        (
            ChatMessage(
                role="user", content="see", images=(ImagePart(url="a"), ImagePart(url="b"))
            ),
            5 + 2 * IMAGE_TOKEN_ESTIMATE,
        ),
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


# ---------------------------------------------------------------- a request's split

PHOTO = ChatMessage(
    role="user", content="look", images=(ImagePart(url="data:image/png;base64,AA"),)
)


def test_ensure_token_estimate_keeps_a_cached_estimate_and_fills_a_missing_one() -> None:
    cached = ChatMessage(role="user", content="hello world!", tokens=99)
    assert ensure_token_estimate(cached) is cached
    assert ensure_token_estimate(ChatMessage(role="user", content="hello world!")).tokens == 7


def test_system_and_image_tokens_count_only_their_part() -> None:
    messages = [ChatMessage(role="system", content="hello world!"), PHOTO, PHOTO]
    assert system_tokens(messages) == 7
    assert image_tokens(messages) == 2 * IMAGE_TOKEN_ESTIMATE
    sized = ChatMessage(role="user", content="", images=(ImagePart(url="x", tokens=1105),))
    assert image_tokens([sized, PHOTO]) == 1105 + IMAGE_TOKEN_ESTIMATE  # its own estimate


@pytest.mark.parametrize(
    ("messages", "current_index", "expected"),
    [
        (
            [
                ChatMessage(role="system", content="x" * 400),
                ChatMessage(role="user", content="hello world!"),
                ChatMessage(role="user", content="hello world!!"),
            ],
            2,
            RequestTokens(history=7, current=8, images=0, messages=15),
        ),
        (
            [
                ChatMessage(role="system", content="s"),
                PHOTO,
                ChatMessage(role="user", content="hi"),
            ],
            2,
            RequestTokens(
                history=5, current=5, images=IMAGE_TOKEN_ESTIMATE, messages=10 + 765, image_count=1
            ),
        ),
        (
            [
                ChatMessage(role="system", content="s"),
                ChatMessage(role="user", content="hi"),
                PHOTO,
                ChatMessage(role="tool", content="ok", tool_call_id="c1", name="f"),
            ],
            2,
            RequestTokens(
                history=5, current=10, images=IMAGE_TOKEN_ESTIMATE, messages=15 + 765, image_count=1
            ),
        ),
    ],
    ids=["system left out", "image in history", "image and tool step in current"],
)
def test_split_request_tokens(
    messages: list[ChatMessage], current_index: int, expected: RequestTokens
) -> None:
    assert split_request_tokens(messages, current_index) == expected


def test_the_cached_estimate_keeps_every_other_field() -> None:
    """`with_token_estimate` spells `dataclasses.replace` out: a field added to the message
    later must be carried over too."""
    message = ChatMessage(
        role="assistant",
        content="done",
        tool_calls=(ToolCall(id="c1", name="search", arguments="{}"),),
        tool_call_id="t1",
        name="search",
        images=(ImagePart(url="data:image/png;base64,AAAA", tokens=85),),
        is_breadcrumb=True,
        continues_turn=True,
        is_error=True,
        tokens=3,
        reasoning=Reasoning(text="why", format="reasoning_content"),
    )
    expected = dataclasses.replace(message, tokens=compute_message_tokens(message))
    assert with_token_estimate(message) == expected
    defaults = ChatMessage(role="user")
    assert all(
        getattr(message, f.name) != getattr(defaults, f.name)
        for f in dataclasses.fields(ChatMessage)
    ), "the example must set every field, so a forgotten one shows"
