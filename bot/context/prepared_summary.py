"""Summaries prepared before the window moves: which of them a move may start on.

- `prepared_summaries`: the summaries found inside the loaded window, each with the turn
  it lets the window start at;
- `usable_summary`: whether one of them already serves a move (`prepared_start_fits`: the
  window from it keeps the full headroom), so the move need not fold.

The plan that uses them is `bot.context.window_plan`'s. See docs/context-window.md, The
summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from bot.context.window import TurnCosts, WindowLimits
from bot.domain.records import StoredRecord, SummaryRecord


def prepared_start_fits(costs: TurnCosts, start: int, limits: WindowLimits) -> bool:
    """Whether the window may start at turn `start` (where a prepared summary ends) instead
    of where the move would put it: every limit holds with the full headroom, the same
    targets a move aims at (`select_window`), so the window after a move onto a prepared
    summary is never fuller than after a fold made at the move. Between a summary prepared
    too early and a fold now, the cheaper next break wins: the fold now keeps the next move
    as far away as any move, and a window at 82-87 % would break the cached prefix again
    within a few messages."""
    keep = 1 - Fraction(repr(limits.headroom))
    tokens = sum(costs.tokens[start:])
    messages = sum(costs.messages[start:])
    count = len(costs.tokens) - start
    answered = list(costs.answered[start:]) if costs.answered else [True] * count
    if answered:
        answered[-1] = True  # the current turn counts (as in `select_window`)
    return (
        (limits.token_budget <= 0 or tokens <= math.floor(limits.token_budget * keep))
        and messages <= max(1, math.floor(max(limits.max_messages, 1) * keep))
        and sum(answered) <= max(1, math.floor(max(limits.max_turns, 1) * keep))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedSummary:
    """A summary found inside the loaded window: it covers every record before turn `turn`,
    so the window may start there with `summary` in front."""

    turn: int
    summary: SummaryRecord


def prepared_summaries(
    found: Iterable[StoredRecord],
    records: Sequence[StoredRecord],
    turn_starts: Sequence[int],
) -> tuple[PreparedSummary, ...]:
    """The summaries among `found` (the session's summary records, oldest first) that hang
    right before a turn of `records` (`turn_starts[i]`: the record index where turn i
    starts), in the order found; one hangs under the last record it covers."""
    index = {record.id: i for i, record in enumerate(records)}
    turn_of = {start: turn for turn, start in enumerate(turn_starts)}
    prepared: list[PreparedSummary] = []
    for record in found:
        at = index.get(record.parent_id or -1, -2) + 1
        body = record.body
        if isinstance(body, SummaryRecord) and body.text and at in turn_of:
            prepared.append(PreparedSummary(turn=turn_of[at], summary=body))
    return tuple(prepared)


def usable_summary(
    start: int, prepared: Sequence[PreparedSummary], costs: TurnCosts, limits: WindowLimits
) -> PreparedSummary | None:
    """The newest prepared summary a move to turn `start` may use instead of a fold: one at
    or after `start` (the window then starts a little later), or one before it from which
    the window still keeps the full headroom (`prepared_start_fits`). None: fold now."""
    for found in reversed(prepared):
        if found.turn >= start or prepared_start_fits(costs, found.turn, limits):
            return found
    return None
