"""`IndexedHistory`: the same trims as a plain list, with the dropped figures read in O(1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.context.history_trim import (
    IndexedHistory,
    TrimResult,
    trim_to_recent_turns,
)
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import estimate_history_tokens
from bot.context.turn_cap import trim_to_recent_turn_count
from bot.domain.messages import ChatMessage
from tests.test_context.histories import assistant, crumb, histories, system, tool, user


def _figures(result: TrimResult) -> tuple[object, ...]:
    event = HistoryTrimmed.from_result(
        result, reason="token_budget", budget=0, session=1, turn_id="t"
    )
    return (
        result.messages,
        result.dropped,
        event.dropped_messages,
        event.dropped_turns,
        event.kept_turns,
        event.tokens_before,
        event.tokens_after,
    )


@given(history=histories(), budget=st.integers(min_value=-5, max_value=400))
def test_a_token_trim_over_an_indexed_history_is_the_plain_trim(
    history: tuple[list[ChatMessage], bool], budget: int
) -> None:
    messages, crumb_present = history
    indexed = IndexedHistory(messages)
    plain = trim_to_recent_turns(messages, budget, crumb_present=crumb_present)
    fast = trim_to_recent_turns(indexed, budget, crumb_present=crumb_present)
    assert _figures(fast) == _figures(plain)


@given(history=histories(), turns=st.integers(min_value=0, max_value=6))
def test_the_turn_cap_takes_an_indexed_history_too(
    history: tuple[list[ChatMessage], bool], turns: int
) -> None:
    messages, crumb_present = history
    indexed = IndexedHistory(messages)
    assert _figures(trim_to_recent_turn_count(indexed, turns, crumb_present=crumb_present)) == (
        _figures(trim_to_recent_turn_count(messages, turns, crumb_present=crumb_present))
    )


def test_appending_keeps_the_totals_of_every_span() -> None:
    messages = [
        system(),
        crumb(),
        user("first question"),
        assistant("", "c1"),
        tool("c1", "result " * 20),
        assistant("answer"),
        user("second"),
    ]
    indexed = IndexedHistory(messages[:3])
    indexed.extend(messages[3:])
    assert list(indexed) == messages
    assert len(indexed) == len(messages)
    assert indexed[2] == messages[2]
    assert indexed[1:3] == messages[1:3]
    assert indexed.tokens == estimate_history_tokens(messages)
    # counted: no system row, no crumb; turn starts: the two real user messages
    assert indexed.span(0, len(messages)) == (5, 2, estimate_history_tokens(messages))
    assert indexed.span(3, 6) == (3, 0, estimate_history_tokens(messages[3:6]))
