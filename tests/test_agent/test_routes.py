"""Routes: which provider and model a session uses, its window, and what a call costs."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.routes import Prices, ProfileEntry, RouteTable
from bot.context.window import ProfileCapacity, window_for_math
from bot.ports import Usage

PRICES = Prices(
    input_per_mtok=2.0, cached_input_per_mtok=0.5, output_per_mtok=8.0, cache_write_per_mtok=2.5
)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (Usage(input_tokens=0, output_tokens=0), 0.0),
        (Usage(input_tokens=1_000_000, output_tokens=0), 2.0),
        (Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=1_000_000), 0.5),
        (Usage(input_tokens=10_000, output_tokens=500, cached_tokens=8_000), 0.012),
        (Usage(input_tokens=100, output_tokens=0, cached_tokens=400), 0.00005),
        # Anthropic-shaped: 1M billed input = 200k uncached + 500k reads + 300k writes
        (
            Usage(
                input_tokens=1_000_000,
                output_tokens=0,
                cached_tokens=500_000,
                cache_write_tokens=300_000,
            ),
            0.2 * 2.0 + 0.5 * 0.5 + 0.3 * 2.5,
        ),
        (
            Usage(input_tokens=1_000, output_tokens=0, cached_tokens=600, cache_write_tokens=900),
            (600 * 0.5 + 400 * 2.5) / 1_000_000,
        ),
    ],
    ids=[
        "nothing",
        "uncached",
        "all-cached",
        "mixed",
        "cached-clamped-to-input",
        "reads-and-writes",
        "writes-clamped-to-input",
    ],
)
def test_cost(usage: Usage, expected: float) -> None:
    assert PRICES.cost(usage) == pytest.approx(expected)


def test_the_cache_write_cost_is_the_writes_part_of_the_cost() -> None:
    usage = Usage(
        input_tokens=10_000, output_tokens=100, cached_tokens=4_000, cache_write_tokens=5_000
    )
    assert PRICES.cache_write_cost(usage) == pytest.approx(5_000 * 2.5 / 1_000_000)
    without = Prices(input_per_mtok=2.0, cached_input_per_mtok=0.5, output_per_mtok=8.0)
    # a profile without a write price bills writes at nothing: the write share shows 0 %
    assert without.cache_write_cost(usage) == 0.0


def test_one_hour_cache_writes_are_priced_apart() -> None:
    """Of 1,000 written tokens 600 were written for 1 hour: those at the 1-hour price (2 ×
    input unless set), the other 400 at the 5-minute price."""
    usage = Usage(
        input_tokens=1_000, output_tokens=0, cache_write_tokens=1_000, cache_write_1h_tokens=600
    )
    assert PRICES.cache_write_cost(usage) == pytest.approx((400 * 2.5 + 600 * 4.0) / 1_000_000)
    assert PRICES.cost(usage) == pytest.approx((400 * 2.5 + 600 * 4.0) / 1_000_000)
    priced = Prices(input_per_mtok=2.0, cache_write_per_mtok=2.5, cache_write_1h_per_mtok=3.0)
    assert priced.cache_write_cost(usage) == pytest.approx((400 * 2.5 + 600 * 3.0) / 1_000_000)


def routes() -> RouteTable:
    model = ScriptedModel()
    return RouteTable(
        {
            "default": ProfileEntry(
                provider=model,
                capacity=ProfileCapacity(name="default", model="chat", context_window=64_000),
            ),
            "big": ProfileEntry(
                provider=model,
                capacity=ProfileCapacity(name="big", model="", context_window=200_000),
            ),
        },
        default_profile="default",
        default_model="chat",
    )


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        (None, ("default", "chat", 64_000, 64_000)),
        ("other-model", ("default", "other-model", None, 32_000)),
        ("big", ("big", "chat", 200_000, 200_000)),
        ("big:any-model", ("big", "any-model", 200_000, 200_000)),
        ("nope:x", ("default", "x", None, 32_000)),
    ],
    ids=["default", "model-mismatch-unknown", "profile", "profile-without-model", "unknown"],
)
def test_route_resolution(route: str | None, expected: tuple[object, ...]) -> None:
    resolved = routes().resolve(route)
    got = (
        resolved.profile,
        resolved.model,
        resolved.context_window,
        window_for_math(resolved.context_window),
    )
    assert got == expected


async def test_only_routes_whose_provider_marks_breakpoints_pay_for_cache_digests() -> None:
    from adapters.llm.anthropic_provider import AnthropicProvider
    from adapters.llm.openai_provider import OpenAIProvider
    from bot.agent.routes import marks_cache

    async with (
        OpenAIProvider("https://api.openai.com/v1", "k") as automatic,
        AnthropicProvider("https://api.anthropic.com", "k") as anthropic,
    ):
        assert not marks_cache(automatic), "an automatic prefix cache needs no plan digests"
        assert marks_cache(anthropic)
        table = RouteTable(
            {
                "auto": ProfileEntry(provider=automatic, capacity=ProfileCapacity(name="auto")),
                "marks": ProfileEntry(provider=anthropic, capacity=ProfileCapacity(name="marks")),
            },
            default_profile="auto",
            default_model="m",
        )
        assert not table.resolve("auto").marks_cache
        assert table.resolve("marks").marks_cache
    assert marks_cache(ScriptedModel()), "in-process: the plan is kept as it was"
