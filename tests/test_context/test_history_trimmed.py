"""`HistoryTrimmed`: the event a trim or a window move reports, built from either."""

from __future__ import annotations

import pytest

from bot.context.history_trim import trim_to_recent_turns
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.window import WindowDecision, WindowLimits
from tests.test_context.histories import three_turns

H = three_turns()  # 49 tokens, 3 turns


def test_history_trimmed_from_result_carries_the_figures() -> None:
    result = trim_to_recent_turns(H, 34)
    event = HistoryTrimmed.from_result(
        result, reason="token_budget", budget=34, session=5, turn_id="t1"
    )
    assert event == HistoryTrimmed(
        dropped_messages=4,
        dropped_turns=2,
        kept_turns=1,
        reason="token_budget",
        tokens_before=49,
        tokens_after=21,
        budget=34,
        session=5,
        turn_id="t1",
    )


def test_history_trimmed_from_window() -> None:
    decision = WindowDecision(
        start=3,
        moved=True,
        reason="turn_limit",
        tokens=40,
        tokens_before=90,
        kept_turns=2,
        dropped_turns=3,
        dropped_messages=7,
    )
    limits = WindowLimits(token_budget=2_000, max_turns=4)
    event = HistoryTrimmed.from_window(decision, limits, session=1, turn_id="t")
    assert (event.reason, event.tokens_before, event.tokens_after, event.dropped_messages) == (
        "turn_limit",
        90,
        40,
        7,
    )
    assert event.budget == 2_000  # the window's limit, in the same units as its tokens
    with pytest.raises(ValueError, match="did not move"):
        HistoryTrimmed.from_window(
            WindowDecision(
                start=0,
                moved=False,
                reason=None,
                tokens=1,
                tokens_before=1,
                kept_turns=1,
                dropped_turns=0,
                dropped_messages=0,
            ),
            WindowLimits(token_budget=1),
            session=1,
            turn_id="t",
        )
