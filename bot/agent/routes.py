"""Model routes: which profile, model and provider a session uses, and its context window.

See docs/context-window.md, Runtime budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from bot.context.images import ImageWire
from bot.context.window import ProfileCapacity, resolve_window
from bot.ports import LLMProvider, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """Per-million-token prices of a provider profile. `cache_write_per_mtok` prices the
    5-minute cache writes, `cache_write_1h_per_mtok` the 1-hour ones (Anthropic bills them
    at 1.25× and 2× the input price); `None` there means 2× the input price."""

    input_per_mtok: float = 0.0
    cached_input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_write_per_mtok: float = 0.0
    cache_write_1h_per_mtok: float | None = None
    configured: bool = field(init=False, repr=False, compare=False)
    """Whether any price is set; without one a call's cost is unknown, not zero (decided once,
    when the prices are made: every call asks)."""

    def __post_init__(self) -> None:
        prices = (
            self.input_per_mtok,
            self.cached_input_per_mtok,
            self.output_per_mtok,
            self.cache_write_per_mtok,
            self.cache_write_1h_per_mtok or 0.0,
        )
        object.__setattr__(self, "configured", any(price > 0 for price in prices))

    @property
    def hour_write_per_mtok(self) -> float:
        """The 1-hour write price in effect (the default: 2× input)."""
        if self.cache_write_1h_per_mtok is not None:
            return self.cache_write_1h_per_mtok
        return 2 * self.input_per_mtok

    def cost(self, usage: Usage) -> float:
        """The call as billed: cache reads at the cached price, cache writes at the write
        price, the rest of the input at the input price, plus output.

        Reads and writes are parts of `input_tokens` (docs/architecture.md, Tokens, caches
        and usage as billed). A provider that reports more reads and writes than input is
        clamped (reads first, then writes) rather than billed negative input."""
        total = max(0, usage.input_tokens)
        cached = max(0, min(usage.cached_tokens, total))
        writes = max(0, min(usage.cache_write_tokens, total - cached))
        uncached = total - cached - writes
        return (
            uncached * self.input_per_mtok
            + cached * self.cached_input_per_mtok
            + max(0, usage.output_tokens) * self.output_per_mtok
        ) / 1_000_000 + self.cache_write_cost(usage)

    def cache_write_cost(self, usage: Usage) -> float:
        """The part of `cost` the cache writes took (clamped the same way): the 1-hour
        writes at their price, the rest at the 5-minute price."""
        total = max(0, usage.input_tokens)
        cached = max(0, min(usage.cached_tokens, total))
        writes = max(0, min(usage.cache_write_tokens, total - cached))
        hour = max(0, min(usage.cache_write_1h_tokens, writes))
        return (
            (writes - hour) * self.cache_write_per_mtok + hour * self.hour_write_per_mtok
        ) / 1_000_000


TokenCount = Callable[[str], int]
"""An exact offline tokenizer's count of one text (`adapters.tokenizers`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRoute:
    """The resolved route of a call: profile, model, provider and window.

    `context_window` is None when the capacity is unknown (nothing reported to clients);
    `window_for_math(context_window)` (the 32,000 assumed for unknown capacity) is what budgets
    and capacity checks use. `count_tokens` is the
    operator's exact tokenizer for this model, when one is configured."""

    profile: str
    model: str
    provider: LLMProvider
    context_window: int | None
    prices: Prices = Prices()
    count_tokens: TokenCount | None = None
    wire: ImageWire = "openai"
    """The provider's wire (`kind`): how images are sized and counted."""
    vision: bool = False
    """The profile says its model sees images (`vision = true`, env `LLM_VISION`)."""
    marks_cache: bool = True
    """Whether the provider writes the request's cache plan as markers (`marks_cache`);
    when it does not, the plan's prefix digests are not worth computing."""
    fallback_from: str | None = None
    """The profile this route stands in for (`bot.agent.fallback`); None: its own route."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileEntry:
    """One provider profile: its provider, declared capacity, prices and tokenizer."""

    provider: LLMProvider
    capacity: ProfileCapacity
    prices: Prices = Prices()
    count_tokens: TokenCount | None = None
    """Counts for the profile's configured model (any model when it names none)."""
    wire: ImageWire = "openai"
    vision: bool = False


class RouteChains(Protocol):
    """The profiles' fallback chains as routes and callers use them
    (`bot.agent.fallback.FallbackChains`)."""

    def in_chain(self, route: ModelRoute) -> bool: ...

    def route_for(self, session_id: int, route: ModelRoute) -> ModelRoute: ...

    def candidates(self, session_id: int, route: ModelRoute) -> list[ModelRoute]: ...

    def failed(self, route: ModelRoute) -> None: ...

    def answered(self, session_id: int, route: ModelRoute) -> None: ...


class RouteTable:
    """Resolves a session's route string (`profile`, `profile:model` or `model`).
    `chains`: the profiles' fallback chains (`bot.agent.fallback`), None without any."""

    chains: RouteChains | None = None

    def __init__(
        self,
        profiles: Mapping[str, ProfileEntry],
        *,
        default_profile: str,
        default_model: str,
        fallback_window: int = 0,
    ) -> None:
        if default_profile not in profiles:
            raise ValueError(f"unknown default provider profile {default_profile!r}")
        self._profiles = dict(profiles)
        self._capacities = {name: entry.capacity for name, entry in self._profiles.items()}
        # a provider's wire options are fixed when it is made: asked once, not every turn
        self._marks_cache = {
            name: marks_cache(entry.provider) for name, entry in self._profiles.items()
        }
        self.default_profile = default_profile
        self.default_model = default_model
        self._fallback_window = fallback_window

    async def aclose(self) -> None:
        """Close the providers' HTTP clients."""
        for entry in self._profiles.values():
            close = getattr(entry.provider, "aclose", None)
            if close is not None:
                await close()

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(self._profiles)

    def parse(self, route: str | None) -> tuple[str, str]:
        """(profile name, model) for a stored route string."""
        if not route:
            return self.default_profile, self.default_model
        name, sep, model = route.partition(":")
        if sep:
            return name, model
        if route in self._profiles:
            entry = self._profiles[route]
            return route, entry.capacity.model or self.default_model
        return self.default_profile, route

    def resolve_for(self, session_id: int, route: str | None) -> ModelRoute:
        """The route a session's turn is planned for: its own, or the fallback it stays on
        while its own route is down (`FallbackChains.route_for`)."""
        resolved = self.resolve(route)
        if self.chains is None:
            return resolved
        return self.chains.route_for(session_id, resolved)

    def resolve(self, route: str | None) -> ModelRoute:
        name, model = self.parse(route)
        entry = self._profiles.get(name)
        if entry is None:
            name, entry = self.default_profile, self._profiles[self.default_profile]
        return ModelRoute(
            profile=name,
            model=model,
            provider=entry.provider,
            context_window=resolve_window(
                self._capacities, name, model, fallback_window=self._fallback_window
            ),
            prices=entry.prices,
            # a tokenizer file belongs to the model it was made for, like the window
            count_tokens=entry.count_tokens if entry.capacity.model in ("", model) else None,
            wire=entry.wire,
            vision=entry.vision,
            marks_cache=self._marks_cache[name],
        )


def marks_cache(provider: LLMProvider) -> bool:
    """Whether `provider` marks cache breakpoints from the plan: what its wire options say
    (`options.marks_breakpoints`, the HTTP providers'), else assumed (the scripted model
    keeps the plan, and the bench's cache simulator reads it)."""
    marks = getattr(getattr(provider, "options", None), "marks_breakpoints", True)
    return marks if isinstance(marks, bool) else True
