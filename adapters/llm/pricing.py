"""What one model call cost, from the usage the provider reported and per-million-token prices."""

from __future__ import annotations

from bot.ports import Usage

_MILLION = 1_000_000


def cost_of(
    usage: Usage,
    *,
    price_input_per_mtok: float,
    price_cached_input_per_mtok: float,
    price_output_per_mtok: float,
) -> float:
    """Cached input at the cached price, the rest of the input at the input price, plus output.

    `cached_tokens` is part of `input_tokens` (see `Usage`); a provider that reports more
    cached than input tokens is clamped rather than billed negative input.
    """
    cached = max(0, min(usage.cached_tokens, usage.input_tokens))
    uncached = max(0, usage.input_tokens) - cached
    return (
        uncached * price_input_per_mtok
        + cached * price_cached_input_per_mtok
        + max(0, usage.output_tokens) * price_output_per_mtok
    ) / _MILLION


__all__ = ["cost_of"]
