from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.context.window import (
    TurnCosts,
    WindowDecision,
    WindowLimits,
    check_capacity,
    recovery_target,
    select_window,
    turn_costs,
)
from bot.domain.messages import ChatMessage
from bot.errors import CapacityExceeded
from tests.test_context.histories import assistant, crumb, tool, user


def decide(
    tokens: list[int], start: int, limits: WindowLimits, messages: list[int] | None = None
) -> WindowDecision:
    return select_window(tokens, messages or [2] * len(tokens), start, limits)


@pytest.mark.parametrize(
    ("tokens", "messages", "start", "limits", "expected"),
    [
        (
            [100] * 9,
            None,
            0,
            WindowLimits(token_budget=900),
            WindowDecision(
                start=0,
                moved=False,
                reason=None,
                tokens=900,
                tokens_before=900,
                kept_turns=9,
                dropped_turns=0,
                dropped_messages=0,
            ),
        ),
        (
            [100] * 10,
            None,
            0,
            WindowLimits(token_budget=900),
            WindowDecision(
                start=4,
                moved=True,
                reason="token_budget",
                tokens=600,
                tokens_before=1000,
                kept_turns=6,
                dropped_turns=4,
                dropped_messages=8,
            ),
        ),
        (
            [100] * 10,
            None,
            0,
            WindowLimits(token_budget=900, headroom=0.0),
            WindowDecision(
                start=1,
                moved=True,
                reason="token_budget",
                tokens=900,
                tokens_before=1000,
                kept_turns=9,
                dropped_turns=1,
                dropped_messages=2,
            ),
        ),
        (
            [1] * 5,
            None,
            0,
            WindowLimits(token_budget=0, max_turns=4),
            WindowDecision(
                start=2,
                moved=True,
                reason="turn_limit",
                tokens=3,
                tokens_before=5,
                kept_turns=3,
                dropped_turns=2,
                dropped_messages=4,
            ),
        ),
        (
            [1] * 3,
            None,
            0,
            WindowLimits(token_budget=0, max_turns=0),
            WindowDecision(
                start=2,
                moved=True,
                reason="turn_limit",
                tokens=1,
                tokens_before=3,
                kept_turns=1,
                dropped_turns=2,
                dropped_messages=4,
            ),
        ),
        (
            [1, 1, 1],
            [4, 4, 4],
            0,
            WindowLimits(token_budget=0, max_messages=10),
            WindowDecision(
                start=2,
                moved=True,
                reason="message_limit",
                tokens=1,
                tokens_before=3,
                kept_turns=1,
                dropped_turns=2,
                dropped_messages=8,
            ),
        ),
        (
            [100, 5_000],
            None,
            0,
            WindowLimits(token_budget=1_000),
            WindowDecision(
                start=1,
                moved=True,
                reason="token_budget",
                tokens=5_000,
                tokens_before=5_100,
                kept_turns=1,
                dropped_turns=1,
                dropped_messages=2,
            ),
        ),
        (
            [5_000],
            None,
            0,
            WindowLimits(token_budget=1_000),
            WindowDecision(
                start=0,
                moved=False,
                reason=None,
                tokens=5_000,
                tokens_before=5_000,
                kept_turns=1,
                dropped_turns=0,
                dropped_messages=0,
            ),
        ),
        (
            [100] * 60,
            None,
            0,
            WindowLimits(token_budget=1_000_000, max_turns=50, max_messages=1_000),
            WindowDecision(
                start=22,
                moved=True,
                reason="turn_limit",
                tokens=3_800,
                tokens_before=6_000,
                kept_turns=38,  # 50 - floor(50 / 4)
                dropped_turns=22,
                dropped_messages=44,
            ),
        ),
        (
            [100] * 10,
            [20] * 10,
            0,
            WindowLimits(token_budget=950, max_turns=50, max_messages=100),
            WindowDecision(
                start=7,
                moved=True,
                reason="token_budget",
                tokens=300,
                tokens_before=1_000,
                kept_turns=3,
                dropped_turns=7,
                dropped_messages=140,
            ),
        ),
        (
            [100] * 4,
            None,
            99,
            WindowLimits(token_budget=10),
            WindowDecision(
                start=3,
                moved=False,
                reason=None,
                tokens=100,
                tokens_before=100,
                kept_turns=1,
                dropped_turns=0,
                dropped_messages=0,
            ),
        ),
        (
            [100] * 4,
            None,
            -5,
            WindowLimits(token_budget=1_000),
            WindowDecision(
                start=0,
                moved=False,
                reason=None,
                tokens=400,
                tokens_before=400,
                kept_turns=4,
                dropped_turns=0,
                dropped_messages=0,
            ),
        ),
        (
            [],
            [],
            3,
            WindowLimits(token_budget=10),
            WindowDecision(
                start=0,
                moved=False,
                reason=None,
                tokens=0,
                tokens_before=0,
                kept_turns=0,
                dropped_turns=0,
                dropped_messages=0,
            ),
        ),
    ],
    ids=[
        "at the budget: stays",
        "over: jumps to 75 % of the budget",
        "no headroom: just fits",
        "turn cap with headroom",
        "max_turns 0 keeps the newest turn",
        "message cap",
        "newest turn kept over budget",
        "only the newest turn: nothing to move",
        "token budget first, but every limit gets headroom",
        "messages cap joins the token move",
        "start past the end is clamped",
        "negative start is clamped",
        "no turns",
    ],
)
def test_select_window(
    tokens: list[int],
    messages: list[int] | None,
    start: int,
    limits: WindowLimits,
    expected: WindowDecision,
) -> None:
    assert decide(tokens, start, limits, messages) == expected


def test_the_start_moves_in_chunks_as_turns_arrive() -> None:
    """With 100-token turns and a 900 budget the cached prefix breaks every 4 turns, not
    on every turn as a sliding window would."""
    limits = WindowLimits(token_budget=900)
    start, moves = 0, []
    for n in range(1, 21):
        decision = decide([100] * n, start, limits)
        if decision.moved:
            moves.append(n)
        start = decision.start
    assert moves == [10, 14, 18]
    assert start == 12


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="same turns"):
        select_window([1, 2], [1], 0, WindowLimits(token_budget=1))


def _meets(tokens: list[int], messages: list[int], start: int, limits: WindowLimits) -> bool:
    keep = 1 - Fraction(repr(limits.headroom))
    ok_tokens = limits.token_budget <= 0 or sum(tokens[start:]) <= math.floor(
        limits.token_budget * keep
    )
    cap = max(limits.max_turns, 1)  # its headroom rounds down: a small cap is exact
    ok_turns = len(tokens) - start <= cap - math.floor(cap * (1 - keep))
    ok_messages = sum(messages[start:]) <= max(1, math.floor(max(limits.max_messages, 1) * keep))
    return ok_tokens and ok_turns and ok_messages


def _over(tokens: list[int], messages: list[int], start: int, limits: WindowLimits) -> list[str]:
    over = []
    if limits.token_budget > 0 and sum(tokens[start:]) > limits.token_budget:
        over.append("token_budget")
    if len(tokens) - start > max(limits.max_turns, 1):
        over.append("turn_limit")
    if sum(messages[start:]) > max(limits.max_messages, 1):
        over.append("message_limit")
    return over


turns = st.lists(st.tuples(st.integers(0, 500), st.integers(1, 12)), min_size=0, max_size=40)
limit_sets = st.builds(
    WindowLimits,
    token_budget=st.integers(0, 3_000),
    max_turns=st.integers(0, 30),
    max_messages=st.integers(0, 120),
    headroom=st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.9]),
)


@given(turns, st.integers(-3, 45), limit_sets)
def test_select_window_properties(
    shape: list[tuple[int, int]], current: int, limits: WindowLimits
) -> None:
    tokens = [t for t, _ in shape]
    messages = [m for _, m in shape]
    n = len(tokens)
    clamped = min(max(current, 0), max(n - 1, 0))
    decision = select_window(tokens, messages, current, limits)
    over = _over(tokens, messages, clamped, limits)

    assert decision.start >= clamped, "moved backwards"
    assert decision.start <= max(n - 1, 0), "moved past the newest turn"
    assert decision.moved == (decision.start > clamped)
    if not over:
        assert not decision.moved, "moved while within every limit"
    if decision.moved:
        assert decision.reason == over[0]
        assert decision.start == n - 1 or _meets(tokens, messages, decision.start, limits)
        assert not _meets(tokens, messages, decision.start - 1, limits), "not the first boundary"
        assert decision.dropped_turns == decision.start - clamped
        assert decision.dropped_messages == sum(messages[clamped : decision.start])
        again = select_window(tokens, messages, decision.start, limits)
        assert not again.moved, "a fresh window must not move again at once"
    else:
        assert decision.reason is None
    assert decision.tokens == sum(tokens[decision.start :])
    assert decision.tokens_before == sum(tokens[clamped:])
    assert decision.kept_turns == n - decision.start


@pytest.mark.parametrize(
    ("estimate", "target"), [(300, 200), (100, 66), (1, 0), (0, 0)], ids=["300", "100", "1", "0"]
)
def test_recovery_target(estimate: int, target: int) -> None:
    assert recovery_target(estimate) == target


def test_capacity_that_fits_passes() -> None:
    check_capacity(
        message_tokens=900, tool_schema_tokens=50, image_tokens=50, context_window=1_000, model="m"
    )


def test_capacity_error_names_an_honoured_max_context_tokens() -> None:
    with pytest.raises(CapacityExceeded) as caught:
        check_capacity(
            message_tokens=40_000,
            tool_schema_tokens=500,
            image_tokens=0,
            context_window=36_000,
            model="m",
            context_window_known=False,
            honoured=True,
        )
    text = str(caught.value)
    assert "runtime.max_context_tokens (36,000 tokens) is used as its window" in text
    assert "32,000" not in text
    assert "Raise runtime.max_context_tokens only if" in text


@pytest.mark.parametrize(
    ("parts", "known", "advice"),
    [
        ((5_000, 10, 0), True, "shorten the message or lower runtime.max_tool_result_chars"),
        ((10, 10, 5_000), True, "send fewer or smaller images"),
        ((10, 5_000, 0), True, "enable fewer tools"),
        ((5_000, 10, 0), False, "unknown context window (assumed 1,000 tokens)"),
    ],
    ids=["messages", "images", "tool schemas", "unknown window"],
)
def test_capacity_error_says_what_to_change(
    parts: tuple[int, int, int], known: bool, advice: str
) -> None:
    messages, schemas, images = parts
    with pytest.raises(CapacityExceeded) as caught:
        check_capacity(
            message_tokens=messages,
            tool_schema_tokens=schemas,
            image_tokens=images,
            context_window=1_000,
            model="tiny-model",
            context_window_known=known,
        )
    text = str(caught.value)
    assert advice in text
    assert "'tiny-model'" in text
    assert f"about {messages + schemas + images:,} tokens" in text
    assert "LLM_CONTEXT_WINDOW" in text
    assert "larger window" in text


# ---------------------------------------------------------------- turn costs


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], TurnCosts(tokens=(), messages=(), starts=())),
        ([assistant()], TurnCosts(tokens=(), messages=(), starts=())),
        (
            [user(), assistant("", "c1"), tool("c1"), assistant(), user()],
            TurnCosts(
                tokens=(7 + 6 + 7 + 7, 7),
                messages=(4, 1),
                starts=(0, 4),
                answered=(True, False),
            ),
        ),
        (
            [tool("c0"), assistant(), user(), user(merged=True), crumb(), user()],
            TurnCosts(tokens=(35, 7), messages=(5, 1), starts=(2, 5), answered=(True, False)),
        ),
    ],
    ids=["empty", "no turn start", "a tool exchange stays in its turn", "orphan prefix first"],
)
def test_turn_costs(messages: list[ChatMessage], expected: TurnCosts) -> None:
    assert turn_costs(messages) == expected


# ---------------------------------------------------------------- answered turns (issue 17)


def test_unanswered_turns_do_not_count_against_the_turn_cap() -> None:
    # a group: 60 member messages, the bot answered 3 of them; the turn cap is 50
    tokens = [10] * 60
    answered = [i in (10, 30, 50) for i in range(60)]
    limits = WindowLimits(token_budget=8_000, max_turns=50, max_messages=100)
    decision = select_window(tokens, [1] * 60, 0, limits, answered=answered)
    assert not decision.moved
    # counted as before (every turn), the cap binds
    assert select_window(tokens, [1] * 60, 0, limits).reason == "turn_limit"


def test_answered_turns_still_bind_the_cap() -> None:
    tokens = [10] * 8
    limits = WindowLimits(token_budget=8_000, max_turns=4, max_messages=100)
    decision = select_window(tokens, [2] * 8, 0, limits, answered=[True] * 8)
    assert decision.moved
    assert decision.reason == "turn_limit"
    assert decision.kept_turns == 3  # floor(4 * 0.75)


@pytest.mark.parametrize("cap", [1, 2, 3, 4, 8, 50], ids=lambda c: f"cap{c}")
def test_a_turn_cap_never_shows_fewer_than_its_floor(cap: int) -> None:
    """Turn by turn, the window never drops below N - floor(N/4) answered turns once that
    many exist: a cap of 2 shows the current turn and one earlier exchange on every call."""
    limits = WindowLimits(token_budget=0, max_turns=cap, max_messages=10_000)
    floor_turns = cap - cap // 4
    start = 0
    for n in range(1, 4 * cap + 6):
        decision = select_window([10] * n, [2] * n, start, limits, answered=[True] * n)
        start = decision.start
        assert decision.kept_turns <= cap
        assert decision.kept_turns >= min(n, floor_turns)
