"""The provider call's capacity window: known, honoured or assumed.

See docs/context-window.md, Runtime budget.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.agent.model_call import CapacitySource, capacity_window
from bot.context.window import RuntimeLimits
from tests.test_agent.rig import ROUTE

UNKNOWN = replace(ROUTE, context_window=None)


@pytest.mark.parametrize(
    ("known", "max_context_tokens", "expected"),
    [
        (True, None, (128_000, "known")),
        (True, 100_000, (128_000, "known")),
        (False, 100_000, (100_000, "max_context_tokens")),
        (False, None, (32_000, "assumed")),
        (False, 0, (32_000, "assumed")),
    ],
    ids=["known", "known beats the budget", "honoured", "assumed", "trimming off"],
)
def test_the_capacity_window(
    known: bool, max_context_tokens: int | None, expected: tuple[int, CapacitySource]
) -> None:
    limits = RuntimeLimits(max_context_tokens=max_context_tokens)
    route = ROUTE if known else UNKNOWN
    assert capacity_window(route, limits) == expected
    # the same operand the budget uses, so a request trimmed to the budget is never refused
    if expected[1] != "assumed" or max_context_tokens is None:
        assert limits.effective_context_budget(route.context_window) <= expected[0]
