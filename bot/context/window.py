"""The history window (docs/context-window.md): its budgets, a start that moves in chunks, capacity.

`select_window` works on turns, oldest first, given as their projected token cost and
message count. The start is stable while the window is within every limit, so the
provider's cached prefix survives call after call. When any limit is exceeded, the start
jumps forward to the first turn boundary at which every limit holds with headroom:

    tokens   <= floor(token_budget * (1 - headroom))          (token_budget 0: no token limit)
    turns    <= N - floor(N * headroom)                   (N = max(max_turns, 1))
    messages <= max(1, floor(max(max_messages, 1) * (1 - headroom)))

so the prefix breaks once per chunk, not once per message. The turn cap's headroom rounds
down, so a cap of N never shows fewer than N - floor(N/4) turns: a small cap is exact (a cap
of 2 keeps the current turn and one earlier exchange on every call, never just the current
one every other call). The start never moves
backwards and never past the newest turn, which stays even when it alone is over.

`turns` counts the newest turn (the current one, not yet answered) and, before it, only the
turns the caller says count (`answered`): the turns the bot answered, so a cap of N keeps
the newest max(N, 1) turns including the current one. In a group every member message
starts a turn, and most are never answered; were
they counted, the turn cap would bind long before the message cap and the token budget
(measured: 36 messages, about 800 of 8,000 tokens). Counting answered turns keeps the cap
meaning one thing in every scene (exchanges with the bot, whose tool steps make them long),
while unanswered chatter is bounded by the message cap and the token budget.

The budgets the window is held to live here too: the runtime context budget, the route
(provider + model) window and one value per scene. The runtime budget follows
docs/context-window.md (Runtime budget), with `W` the window operand:

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

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Generic, Literal, TypeVar, assert_never

from bot.context.tokens import estimate_message_tokens
from bot.context.turns import turn_starts
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage
from bot.errors import CapacityExceeded

WindowReason = Literal["token_budget", "turn_limit", "message_limit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowLimits:
    """Limits of the history segment. `max_turns` / `max_messages` of 0 behave as 1."""

    token_budget: int
    max_turns: int = 50
    max_messages: int = 100
    headroom: float = 0.25
    summary_bound: int = 0
    """The summary's bound (tokens) reserved inside the budget; a fold is held to it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowDecision:
    """Where the window starts (a turn index) and what the decision cost.

    `tokens` / `kept_turns` describe the window from `start`; `tokens_before` the window
    from the (clamped) current start. `dropped_*` count what this move left behind (0 when
    it did not move). `reason` is the first limit exceeded, in the order token budget, turn
    limit, message limit; None when the start did not move.
    """

    start: int
    moved: bool
    reason: WindowReason | None
    tokens: int
    tokens_before: int
    kept_turns: int
    dropped_turns: int
    dropped_messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCosts:
    """Projected messages grouped into turns, oldest first: what `select_window` reads.

    `tokens[i]` / `messages[i]` are the estimate and message count of turn i, `starts[i]`
    the index of its first message. Messages before the first turn start (an orphan
    prefix) are counted with the first turn. `answered[i]`: turn i holds a reply of the bot
    (an assistant message), so it counts against the turn cap.
    """

    tokens: tuple[int, ...]
    messages: tuple[int, ...]
    starts: tuple[int, ...]
    answered: tuple[bool, ...] = ()


def turn_costs(messages: Sequence[ChatMessage]) -> TurnCosts:
    """Per-turn token cost and message count of `messages`, and where each turn starts."""
    starts = turn_starts(messages)
    bounds = [0, *starts[1:], len(messages)] if starts else []
    tokens: list[int] = []
    counts: list[int] = []
    answered: list[bool] = []
    for begin, end in itertools.pairwise(bounds):
        tokens.append(sum(estimate_message_tokens(m) for m in messages[begin:end]))
        counts.append(end - begin)
        answered.append(any(m.role == "assistant" for m in messages[begin:end]))
    return TurnCosts(
        tokens=tuple(tokens),
        messages=tuple(counts),
        starts=tuple(starts),
        answered=tuple(answered),
    )


def _with_headroom(limit: int, keep: Fraction) -> int:
    return math.floor(limit * keep)


def select_window(
    turn_tokens: Sequence[int],
    turn_messages: Sequence[int],
    current_start: int,
    limits: WindowLimits,
    *,
    answered: Sequence[bool] | None = None,
) -> WindowDecision:
    """Decide the window start for the next call (pure; cost follows the window).

    `answered[i]` says whether turn i counts against the turn cap; None: every turn does.
    The newest turn always counts (the current one, whose answer is still to come)."""
    if len(turn_tokens) != len(turn_messages):
        raise ValueError("turn_tokens and turn_messages must describe the same turns")
    n = len(turn_tokens)
    if answered is not None and len(answered) != n:
        raise ValueError("answered must describe the same turns")
    weight = [1] * n if answered is None else [1 if a else 0 for a in answered]
    if n:  # the current turn counts, answered or not: a cap of N keeps max(N, 1) turns
        weight[-1] = 1
    start = min(max(current_start, 0), max(n - 1, 0))
    tokens = sum(turn_tokens[start:])
    messages = sum(turn_messages[start:])
    counted = sum(weight[start:])
    max_turns = max(limits.max_turns, 1)
    max_messages = max(limits.max_messages, 1)
    budget = limits.token_budget

    reason: WindowReason | None = None
    if budget > 0 and tokens > budget:
        reason = "token_budget"
    elif counted > max_turns:
        reason = "turn_limit"
    elif messages > max_messages:
        reason = "message_limit"
    if reason is None or start >= n - 1:
        return WindowDecision(
            start=start,
            moved=False,
            reason=None,
            tokens=tokens,
            tokens_before=tokens,
            kept_turns=n - start,
            dropped_turns=0,
            dropped_messages=0,
        )

    # headroom read as the decimal it was written as (1 - 0.3 must be 0.7 exactly)
    keep = 1 - Fraction(repr(limits.headroom))
    token_target = _with_headroom(budget, keep) if budget > 0 else None
    turn_target = max_turns - math.floor(max_turns * (1 - keep))
    message_target = max(1, _with_headroom(max_messages, keep))

    new_start, kept_tokens, kept_messages, kept_counted = start, tokens, messages, counted
    while new_start < n - 1 and not (
        (token_target is None or kept_tokens <= token_target)
        and kept_counted <= turn_target
        and kept_messages <= message_target
    ):
        kept_tokens -= turn_tokens[new_start]
        kept_messages -= turn_messages[new_start]
        kept_counted -= weight[new_start]
        new_start += 1
    return WindowDecision(
        start=new_start,
        moved=True,
        reason=reason,
        tokens=kept_tokens,
        tokens_before=tokens,
        kept_turns=n - new_start,
        dropped_turns=new_start - start,
        dropped_messages=messages - kept_messages,
    )


def moved_to(decision: WindowDecision, costs: TurnCosts, start: int) -> WindowDecision:
    """`decision` (a move) with the window starting at turn `start` instead: what the window
    from there keeps, and what the move leaves behind counted from the same old start."""
    before = decision.start - decision.dropped_turns
    return replace(
        decision,
        start=start,
        tokens=sum(costs.tokens[start:]),
        kept_turns=len(costs.tokens) - start,
        dropped_turns=start - before,
        dropped_messages=sum(costs.messages[before:start]),
    )


def recovery_target(estimate: int) -> int:
    """The reactive trim target after a provider overflow: two thirds of the estimate."""
    return (estimate * 2) // 3


def check_capacity(
    *,
    message_tokens: int,
    tool_schema_tokens: int,
    image_tokens: int,
    context_window: int,
    model: str,
    context_window_known: bool = True,
    honoured: bool = False,
) -> None:
    """Raise `CapacityExceeded` before dispatch when the request cannot fit the window.

    Runs before every dispatch, also with trimming off and for the final summary request.
    The message names the parts and says what to change. `honoured`: the window is
    unknown and `context_window` is `runtime.max_context_tokens`, honoured as the window.
    """
    total = message_tokens + tool_schema_tokens + image_tokens
    if total <= context_window:
        return
    parts = {
        "messages": message_tokens,
        "images": image_tokens,
        "tool schemas": tool_schema_tokens,
    }
    largest = max(parts, key=lambda name: parts[name])
    advice = {
        "messages": "shorten the message or lower runtime.max_tool_result_chars",
        "images": "send fewer or smaller images",
        "tool schemas": "enable fewer tools",
    }[largest]
    if context_window_known:
        known = f"a {context_window:,}-token context window"
        budget = "Raising the trimming budget cannot help."
    elif honoured:
        known = (
            "an unknown context window, so runtime.max_context_tokens "
            f"({context_window:,} tokens) is used as its window"
        )
        budget = "Raise runtime.max_context_tokens only if the model really takes more."
    else:
        known = f"an unknown context window (assumed {context_window:,} tokens)"
        budget = "Raising the trimming budget cannot help."
    raise CapacityExceeded(
        f"the request needs about {total:,} tokens (messages {message_tokens:,}, images "
        f"{image_tokens:,}, tool schemas {tool_schema_tokens:,}) but model {model!r} has "
        f"{known}. To fix: {advice}; or choose a model with a larger window; or, if the "
        "model's real window is larger, set LLM_CONTEXT_WINDOW or the provider profile's "
        f"context_window. {budget}"
    )


# ---------------------------------------------------------------- the runtime budget

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


# ---------------------------------------------------------------- route windows


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
