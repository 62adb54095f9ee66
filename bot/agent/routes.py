"""Model routes: which provider and model a session uses, and what window it has (§3.2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bot.context.budget import ProviderCapacity, resolve_route
from bot.ports import LLMProvider, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """Per-million-token prices of a provider profile."""

    input_per_mtok: float = 0.0
    cached_input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_write_per_mtok: float = 0.0

    @property
    def configured(self) -> bool:
        """Whether any price is set; without one a call's cost is unknown, not zero."""
        return any(
            price > 0
            for price in (
                self.input_per_mtok,
                self.cached_input_per_mtok,
                self.output_per_mtok,
                self.cache_write_per_mtok,
            )
        )

    def cost(self, usage: Usage) -> float:
        """The call as billed: cache reads at the cached price, cache writes at the write
        price, the rest of the input at the input price, plus output.

        Reads and writes are parts of `input_tokens` (DESIGN.md §6.2). A provider that
        reports more reads and writes than input is clamped (reads first, then writes)
        rather than billed negative input."""
        total = max(0, usage.input_tokens)
        cached = max(0, min(usage.cached_tokens, total))
        writes = max(0, min(usage.cache_write_tokens, total - cached))
        uncached = total - cached - writes
        return (
            uncached * self.input_per_mtok
            + cached * self.cached_input_per_mtok
            + writes * self.cache_write_per_mtok
            + max(0, usage.output_tokens) * self.output_per_mtok
        ) / 1_000_000

    def cache_write_cost(self, usage: Usage) -> float:
        """The part of `cost` the cache writes took (clamped the same way)."""
        total = max(0, usage.input_tokens)
        cached = max(0, min(usage.cached_tokens, total))
        writes = max(0, min(usage.cache_write_tokens, total - cached))
        return writes * self.cache_write_per_mtok / 1_000_000


TokenCount = Callable[[str], int]
"""An exact offline tokenizer's count of one text (`adapters.tokenizers`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRoute:
    """A resolved route. `window` is None when the capacity is unknown (nothing reported
    to clients); `context_window_for_math` is what budgets and capacity checks use.
    `count_tokens` is the operator's exact tokenizer for this model, when one is configured."""

    provider_name: str
    model: str
    provider: LLMProvider
    context_window: int | None
    context_window_for_math: int
    prices: Prices = Prices()
    count_tokens: TokenCount | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderEntry:
    provider: LLMProvider
    capacity: ProviderCapacity
    prices: Prices = Prices()
    count_tokens: TokenCount | None = None
    """Counts for the profile's configured model (any model when it names none)."""


class RouteTable:
    """Resolves a session's route string (`profile`, `profile:model` or `model`)."""

    def __init__(
        self,
        providers: Mapping[str, ProviderEntry],
        *,
        default_provider: str,
        default_model: str,
        fallback_window: int = 0,
    ) -> None:
        if default_provider not in providers:
            raise ValueError(f"unknown default provider {default_provider!r}")
        self._providers = dict(providers)
        self.default_provider = default_provider
        self.default_model = default_model
        self._fallback_window = fallback_window

    async def aclose(self) -> None:
        """Close the providers' HTTP clients."""
        for entry in self._providers.values():
            close = getattr(entry.provider, "aclose", None)
            if close is not None:
                await close()

    @property
    def provider_names(self) -> tuple[str, ...]:
        return tuple(self._providers)

    def parse(self, route: str | None) -> tuple[str, str]:
        """(provider name, model) for a stored route string."""
        if not route:
            return self.default_provider, self.default_model
        name, sep, model = route.partition(":")
        if sep:
            return name, model
        if route in self._providers:
            entry = self._providers[route]
            return route, entry.capacity.model or self.default_model
        return self.default_provider, route

    def resolve(self, route: str | None) -> ModelRoute:
        name, model = self.parse(route)
        entry = self._providers.get(name)
        if entry is None:
            name, entry = self.default_provider, self._providers[self.default_provider]
        capacities = {n: e.capacity for n, e in self._providers.items()}
        resolved = resolve_route(capacities, name, model, fallback_window=self._fallback_window)
        return ModelRoute(
            provider_name=name,
            model=model,
            provider=entry.provider,
            context_window=resolved.context_window,
            context_window_for_math=resolved.context_window_for_math,
            prices=entry.prices,
            # a tokenizer file belongs to the model it was made for, like the window
            count_tokens=entry.count_tokens if entry.capacity.model in ("", model) else None,
        )
