from __future__ import annotations

import pytest

from bot.context.window import (
    PerScene,
    ProfileCapacity,
    RuntimeLimits,
    bound_summaries,
    effective_context_budget,
    resolve_window,
    window_for_math,
)
from bot.domain.ids import Scene


@pytest.mark.parametrize(
    ("limits", "window", "budget"),
    [
        (RuntimeLimits(), None, 32_000),
        (RuntimeLimits(), 0, 32_000),
        (RuntimeLimits(), 8_000, 8_000),
        (RuntimeLimits(), 128_000, 32_000),
        (RuntimeLimits(max_context_tokens=0, context_compact_ratio=0.5), 128_000, 0),
        (RuntimeLimits(max_context_tokens=100_000), None, 100_000),
        (RuntimeLimits(max_context_tokens=100_000), 64_000, 64_000),
        (RuntimeLimits(max_context_tokens=20_000), 64_000, 20_000),
        (RuntimeLimits(context_compact_ratio=0.5), 128_000, 64_000),
        (RuntimeLimits(max_context_tokens=50_000, context_compact_ratio=0.5), 128_000, 50_000),
        (RuntimeLimits(max_context_tokens=100_000, context_compact_ratio=0.5), None, 50_000),
        (RuntimeLimits(context_compact_ratio=0.5), None, 16_000),
        (RuntimeLimits(context_compact_ratio=1.5), 128_000, 32_000),
        (RuntimeLimits(context_compact_ratio=0.0), 128_000, 32_000),
        (RuntimeLimits(context_compact_ratio=1.0), 128_000, 128_000),
        (RuntimeLimits(context_compact_ratio=0.29), 100, 29),
        (RuntimeLimits(context_compact_ratio=0.00001), 1_000, 1),
        (
            RuntimeLimits(history_pruning_enabled=True, history_pruning_max_tokens=4_000),
            None,
            4_000,
        ),
        (RuntimeLimits(history_pruning_enabled=True, history_pruning_max_tokens=0), None, 32_000),
        (
            RuntimeLimits(history_pruning_enabled=False, history_pruning_max_tokens=4_000),
            None,
            32_000,
        ),
        (
            RuntimeLimits(history_pruning_enabled=True, history_pruning_max_tokens=90_000),
            None,
            32_000,
        ),
        (RuntimeLimits(max_context_tokens=-5), None, 32_000),
    ],
    ids=[
        "defaults, unknown window",
        "window 0 is unknown",
        "capped by a smaller window",
        "32k fallback below a large window",
        "max_context_tokens 0 turns trimming off",
        "quirk: unknown window honours max_context_tokens",
        "absolute capped by the window",
        "absolute below the window",
        "ratio of the window",
        "absolute caps the ratio",
        "quirk: absolute is the ratio's operand",
        "ratio of the 32k fallback",
        "ratio above 1 is unset",
        "ratio 0 is unset",
        "ratio 1 is the whole window",
        "ratio read as written (no 28.99)",
        "at least 1 token",
        "pruning lowers the budget",
        "pruning max 0 does nothing",
        "pruning disabled does nothing",
        "pruning never raises the budget",
        "negative absolute is unset",
    ],
)
def test_effective_context_budget(limits: RuntimeLimits, window: int | None, budget: int) -> None:
    assert limits.effective_context_budget(window) == budget
    assert effective_context_budget(limits, window) == budget


PROFILES = {
    "any": ProfileCapacity(name="any", model="", context_window=64_000),
    "ds": ProfileCapacity(name="ds", model="deepseek-chat", context_window=128_000),
    "blind": ProfileCapacity(name="blind", model="m", context_window=0),
}


@pytest.mark.parametrize(
    ("profile", "model", "fallback", "expected"),
    [
        ("any", "whatever", 0, 64_000),
        ("ds", "deepseek-chat", 0, 128_000),
        ("ds", "", 0, 128_000),
        ("ds", "deepseek-reasoner", 0, None),
        ("blind", "m", 0, None),
        ("nope", "m", 50_000, None),
        (None, "m", 50_000, 50_000),
        (None, "m", 0, None),
    ],
    ids=[
        "profile without a model fits any model",
        "profile model equals the selection",
        "empty selection takes the profile model",
        "another model's window is never borrowed",
        "profile without a window",
        "unknown profile ignores the fallback",
        "no profile: LLM_CONTEXT_WINDOW",
        "no profile, no fallback",
    ],
)
def test_resolve_window(
    profile: str | None, model: str, fallback: int, expected: int | None
) -> None:
    assert resolve_window(PROFILES, profile, model, fallback_window=fallback) == expected


@pytest.mark.parametrize(
    ("window", "for_math"), [(64_000, 64_000), (None, 32_000)], ids=["known", "unknown"]
)
def test_window_for_math(window: int | None, for_math: int) -> None:
    assert window_for_math(window) == for_math


def test_an_unknown_route_keeps_the_absolute_budget_quirk() -> None:
    window = resolve_window(PROFILES, "ds", "deepseek-reasoner")
    limits = RuntimeLimits(max_context_tokens=100_000)
    assert limits.effective_context_budget(window) == 100_000
    assert limits.effective_context_budget(window_for_math(window)) == 32_000


@pytest.mark.parametrize(
    ("scene", "value"),
    [("group", 1), ("private", 2), ("owner", 3)],
    ids=["group", "private", "owner"],
)
def test_per_scene_reads_the_scenes_own_value(scene: Scene, value: int) -> None:
    assert PerScene(group=1, private=2, owner=3).of(scene) == value


def test_a_summary_never_takes_more_than_a_quarter_of_its_scenes_history() -> None:
    history = PerScene(group=8_000, private=2_000, owner=0)
    summaries = PerScene(group=600, private=800, owner=1_500)
    # group: 600 fits in 2,000; private: 800 is cut to 500; owner: no history budget, as set
    assert bound_summaries(summaries, history) == PerScene(group=600, private=500, owner=1_500)
