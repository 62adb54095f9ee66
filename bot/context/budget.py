"""Budgets: the runtime context budget, route (provider + model) window resolution, per scene.

The runtime budget follows docs/context-window.md (Runtime budget), with `W` the window operand:

    W = the resolved window when known (> 0), else max_context_tokens when it is a positive
        int (the documented quirk: honoured, and not clamped to 32,000), else 32,000
    max_context_tokens == 0                  -> 0 (proactive trimming off)
    ratio = context_compact_ratio if 0 < ratio <= 1, else unset
    ratio unset                              -> max_context_tokens or 32,000
    ratio set                                -> max(1, floor(W * ratio)),
                                                then min(that, max_context_tokens) if set
    history pruning enabled with max > 0     -> min(budget, history_pruning_max_tokens)
    finally                                  -> min(budget, W)

A negative `max_context_tokens` is treated as unset (settings forbid it anyway).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Generic, TypeVar, assert_never

from bot.domain.ids import Scene

T = TypeVar("T")

UNKNOWN_WINDOW_TOKENS = 32_000
"""The window used for arithmetic when a route's capacity is unknown; never reported."""


def _exact(ratio: float) -> Fraction:
    # floor(W * 0.29) must be 0.29 * W, not 28.99…: read the ratio as the decimal it was
    # written as
    return Fraction(repr(ratio))


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeLimits:
    """The runtime settings that shape the context budget (`runtime.*` in the settings)."""

    max_context_tokens: int | None = None
    context_compact_ratio: float | None = None
    history_pruning_enabled: bool = False
    history_pruning_max_tokens: int = 0

    def effective_context_budget(self, window: int | None) -> int:
        """The proactive trimming target for a route whose window is `window` (None/≤0 =
        unknown). 0 means proactive trimming is off."""
        absolute = self.max_context_tokens
        if absolute is not None and absolute < 0:
            absolute = None
        if absolute == 0:
            return 0
        if window is not None and window > 0:
            operand = window
        else:
            operand = absolute if absolute is not None else UNKNOWN_WINDOW_TOKENS
        ratio = self.context_compact_ratio
        if ratio is None or not 0 < ratio <= 1:
            budget = absolute if absolute is not None else UNKNOWN_WINDOW_TOKENS
        else:
            budget = max(1, math.floor(operand * _exact(ratio)))
            if absolute is not None:
                budget = min(budget, absolute)
        if self.history_pruning_enabled and self.history_pruning_max_tokens > 0:
            budget = min(budget, self.history_pruning_max_tokens)
        return min(budget, operand)


def effective_context_budget(limits: RuntimeLimits, window: int | None) -> int:
    return limits.effective_context_budget(window)


# ---------------------------------------------------------------- routes


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileCapacity:
    """What a provider profile declares about capacity: its configured model and window."""

    name: str
    model: str = ""
    context_window: int = 0


def resolve_window(
    profiles: Mapping[str, ProfileCapacity],
    profile: str | None,
    model: str,
    *,
    fallback_window: int = 0,
) -> int | None:
    """The context window of `profile` + `model`, None when the capacity is unknown; one
    resolution for every consumer.

    Known only when the named profile exists, declares `context_window > 0`, and its
    configured model is empty or equals the selected one: another model's metadata is
    never borrowed. With no profile named, `fallback_window` (`LLM_CONTEXT_WINDOW`) > 0 is
    the known window. An empty `model` selects the profile's configured model. Unknown
    capacity reports nothing to clients (`/context` says "unknown"), and
    `effective_context_budget` should receive the None so the documented quirk applies.
    """
    if profile is None:
        return fallback_window if fallback_window > 0 else None
    found = profiles.get(profile)
    if found is None:
        return None
    model = model or found.model
    if found.context_window > 0 and found.model in ("", model):
        return found.context_window
    return None


def window_for_math(context_window: int | None) -> int:
    """The window capacity checks use: the known one, else `UNKNOWN_WINDOW_TOKENS`."""
    return context_window if context_window is not None else UNKNOWN_WINDOW_TOKENS


# ---------------------------------------------------------------- scenes


@dataclass(frozen=True, slots=True, kw_only=True)
class PerScene(Generic[T]):
    """One value per scene (a token budget, the caps): built once from the settings, read
    with `of`."""

    group: T
    private: T
    owner: T

    def of(self, scene: Scene) -> T:
        match scene:
            case "group":
                return self.group
            case "private":
                return self.private
            case "owner":
                return self.owner
            case _:
                assert_never(scene)


def summary_bound(configured: int, history_budget: int) -> int:
    """The summary's bound: as configured, but never more than a quarter of the history
    budget it is reserved in (a history without a budget keeps the configured bound). The
    window reserves it and the fold is held to it, both from the same (clamped) budget."""
    return min(configured, history_budget // 4) if history_budget > 0 else configured


def bound_summaries(summaries: PerScene[int], history: PerScene[int]) -> PerScene[int]:
    """The summary's bound in each scene (`summary_bound` of the scene's history budget)."""
    return PerScene(
        group=summary_bound(summaries.group, history.group),
        private=summary_bound(summaries.private, history.private),
        owner=summary_bound(summaries.owner, history.owner),
    )
