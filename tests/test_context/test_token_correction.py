"""The per-route token correction: converges, stays bounded, survives a round trip."""

from __future__ import annotations

import json
import math
import random

import pytest

from bot.context.tokens import (
    MAX_RATIO,
    MAX_STEP,
    MIN_RATIO,
    NO_CORRECTION,
    TokenCorrection,
    corrections_from_dict,
    corrections_to_dict,
    observe,
)


def _feed(state: TokenCorrection, calls: list[tuple[int, int]]) -> TokenCorrection:
    for estimated, reported in calls:
        state = observe(state, estimated=estimated, reported=reported)
    return state


@pytest.mark.parametrize(
    "truth", [0.55, 0.8, 1.3, 2.0], ids=["zh-o200k", "zh-cl100k", "en", "emoji"]
)
def test_it_converges_within_twenty_calls_on_a_noisy_route(truth: float) -> None:
    rng = random.Random(7)
    state = NO_CORRECTION
    for _ in range(20):
        estimated = rng.randint(2_000, 20_000)
        state = observe(
            state, estimated=estimated, reported=round(estimated * truth * rng.uniform(0.97, 1.03))
        )
    assert state.samples == 20
    assert abs(state.ratio / truth - 1) < 0.05
    # and the corrected estimate is what the provider will count
    assert abs(state.apply(10_000) / (10_000 * truth) - 1) < 0.05


def test_one_odd_reply_cannot_swing_a_settled_route() -> None:
    settled = _feed(NO_CORRECTION, [(10_000, 8_000)] * 30)
    assert settled.ratio == pytest.approx(0.8, rel=1e-3)
    after_spike = observe(settled, estimated=10_000, reported=400_000)  # 40x
    after_dip = observe(settled, estimated=10_000, reported=10)
    assert 1 < after_spike.ratio / settled.ratio <= 1.06 + 1e-9
    assert 1 < settled.ratio / after_dip.ratio <= 1.06 + 1e-9
    # and it comes back once the provider is sane again
    back = _feed(after_spike, [(10_000, 8_000)] * 10)
    assert back.ratio == pytest.approx(0.8, rel=0.01)


def test_each_step_is_clamped_even_on_the_first_call() -> None:
    first = observe(NO_CORRECTION, estimated=1_000, reported=4_000)
    assert first.ratio == pytest.approx(1.06)
    assert abs(math.log(first.ratio)) <= MAX_STEP + 1e-12


def test_the_ratio_never_leaves_its_bounds() -> None:
    high = _feed(NO_CORRECTION, [(1_000, 1_000_000)] * 200)
    low = _feed(NO_CORRECTION, [(1_000_000, 1)] * 200)
    assert high.ratio == pytest.approx(MAX_RATIO)
    assert low.ratio == pytest.approx(MIN_RATIO)


@pytest.mark.parametrize(
    ("estimated", "reported"),
    [(5_000, None), (5_000, 0), (10, 400)],
    ids=["not reported", "zero", "tiny estimate"],
)
def test_calls_that_say_nothing_change_nothing(estimated: int, reported: int | None) -> None:
    state = TokenCorrection(ratio=0.9, samples=4)
    assert observe(state, estimated=estimated, reported=reported) == state


def test_apply_rounds_up_and_keeps_zero() -> None:
    state = TokenCorrection(ratio=0.75, samples=3)
    assert state.apply(0) == 0
    assert state.apply(10) == 8
    assert NO_CORRECTION.apply(1234) == 1234


def test_a_budget_in_real_tokens_converts_to_estimate_units() -> None:
    over = TokenCorrection(ratio=0.8, samples=20)  # we over-count: more estimate fits
    under = TokenCorrection(ratio=1.25, samples=20)
    assert over.to_estimate(8_000) == 10_000
    assert under.to_estimate(8_000) == 6_400
    assert over.to_estimate(0) == 0  # "off" stays off
    assert under.to_estimate(1) == 1  # and a positive budget stays on
    for state in (over, under, NO_CORRECTION):
        for budget in (2, 999, 8_000, 131_072):
            assert state.apply(state.to_estimate(budget)) <= budget


def test_a_persisted_book_round_trips_through_json() -> None:
    book = {
        "default": _feed(NO_CORRECTION, [(9_000, 7_000)] * 7),
        "cheap": TokenCorrection(ratio=1.7, samples=40),
    }
    again = corrections_from_dict(json.loads(json.dumps(corrections_to_dict(book))))
    assert again.keys() == book.keys()
    for route, state in book.items():
        assert again[route].samples == state.samples
        assert again[route].ratio == pytest.approx(state.ratio, rel=1e-6)
        assert again[route].apply(12_345) == state.apply(12_345)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"ratio": "x", "samples": 3},
        {"ratio": 9.0, "samples": 3},
        {"ratio": 1.0, "samples": -1},
        {"ratio": float("nan"), "samples": 1},
        {"ratio": True, "samples": 1},
    ],
    ids=["empty", "text", "out of range", "negative samples", "nan", "bool"],
)
def test_a_malformed_persisted_state_starts_fresh(data: dict[str, object]) -> None:
    assert TokenCorrection.from_dict(data) == NO_CORRECTION


def test_a_book_skips_entries_that_are_not_objects() -> None:
    assert corrections_from_dict({"a": 3, "b": {"ratio": 1.2, "samples": 2}}) == {
        "b": TokenCorrection(ratio=1.2, samples=2)
    }
