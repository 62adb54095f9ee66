from __future__ import annotations

import pytest
from hypothesis import given

from bot.context.tokens import compute_message_tokens, with_token_estimate
from bot.context.turns import remove_orphaned_tool_messages
from bot.domain.messages import ChatMessage
from tests.test_context.histories import assistant, histories, system, tool, user

U = user()


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [U, assistant("", "a", "b"), tool("b"), tool("a"), assistant()],
            [U, assistant("", "a", "b"), tool("b"), tool("a"), assistant()],
        ),
        ([U, tool("zz"), assistant()], [U, assistant()]),
        ([U, assistant("", "a"), tool("a"), tool("a")], [U, assistant("", "a"), tool("a")]),
        ([U, assistant("", "a"), U, tool("a")], [U, U]),
        (
            [U, assistant("", "a", "b"), tool("b")],
            [U, with_token_estimate(assistant("", "b")), tool("b")],
        ),
        ([U, assistant("", "a", "b")], [U]),
        ([U, assistant("let me look", "a")], [U, with_token_estimate(assistant("let me look"))]),
        ([U, assistant("  \n", "a")], [U]),
        (
            [U, assistant("", "a"), tool("a"), assistant("", "a"), tool("a")],
            [U, assistant("", "a"), tool("a"), assistant("", "a"), tool("a")],
        ),
        (
            [U, assistant("", "a"), tool("a"), assistant("", "a")],
            [U, assistant("", "a"), tool("a")],
        ),
        ([system(), tool("a"), U], [system(), U]),
        (
            [U, ChatMessage(role="tool", content="x", tool_call_id=None)],
            [U],
        ),
    ],
    ids=[
        "parallel calls answered out of order: unchanged",
        "result without a call",
        "second result for one call",
        "result after another message is not paired",
        "partly answered call keeps the answered one",
        "unanswered calls and no text: message dropped",
        "unanswered call with text: text stays",
        "whitespace is no text",
        "a reused call id pairs per assistant message",
        "reused id: the later unanswered call goes",
        "result before any call",
        "result without a call id",
    ],
)
def test_remove_orphaned_tool_messages(
    messages: list[ChatMessage], expected: list[ChatMessage]
) -> None:
    assert remove_orphaned_tool_messages(messages) == tuple(expected)


def test_a_rebuilt_message_carries_its_new_estimate() -> None:
    partly = assistant("", "a", "b", tokens=999)
    (_, rebuilt, _) = remove_orphaned_tool_messages([U, partly, tool("a")])
    assert rebuilt.tool_calls == partly.tool_calls[:1]
    assert rebuilt.tokens == compute_message_tokens(rebuilt) == 6


@given(histories())
def test_consistent_histories_are_left_alone(history: tuple[list[ChatMessage], bool]) -> None:
    messages, _ = history
    assert remove_orphaned_tool_messages(messages) == tuple(messages)


@given(histories())
def test_dropping_any_message_leaves_no_orphan_after_repair(
    history: tuple[list[ChatMessage], bool],
) -> None:
    messages, _ = history
    for gap in range(len(messages)):
        broken = messages[:gap] + messages[gap + 1 :]
        repaired = remove_orphaned_tool_messages(broken)
        assert remove_orphaned_tool_messages(repaired) == repaired
        calls = {c.id for m in repaired for c in m.tool_calls}
        results = [m.tool_call_id for m in repaired if m.role == "tool"]
        assert set(results) == calls
        assert len(results) == len(set(results))
