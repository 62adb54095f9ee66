"""cost_of: cached input at the cached price, the rest at the input price, plus output."""

from __future__ import annotations

import pytest

from adapters.llm.pricing import cost_of
from bot.ports import Usage

PRICES = {
    "price_input_per_mtok": 2.0,
    "price_cached_input_per_mtok": 0.5,
    "price_output_per_mtok": 8.0,
}


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (Usage(input_tokens=0, output_tokens=0), 0.0),
        (Usage(input_tokens=1_000_000, output_tokens=0), 2.0),
        (Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=1_000_000), 0.5),
        (Usage(input_tokens=10_000, output_tokens=500, cached_tokens=8_000), 0.012),
        (Usage(input_tokens=100, output_tokens=0, cached_tokens=400), 0.00005),
    ],
    ids=["nothing", "uncached", "all-cached", "mixed", "cached-clamped-to-input"],
)
def test_cost_of(usage: Usage, expected: float) -> None:
    assert cost_of(usage, **PRICES) == pytest.approx(expected)


def test_free_models_cost_nothing() -> None:
    usage = Usage(input_tokens=5_000, output_tokens=300, cached_tokens=1_000)
    free = cost_of(
        usage, price_input_per_mtok=0, price_cached_input_per_mtok=0, price_output_per_mtok=0
    )
    assert free == 0
