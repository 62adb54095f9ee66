"""Where a call's window starts, and when its next move folds: the window plan, pure.

- `plan_window`: what a call does with its window: keep the start, or move it onto a prepared
  summary, or move it and fold what departs now; which summary follows the breadcrumb.
- `predict_cut`: where the window start will jump at the next move, when that move is near;
  `usable_summary`: whether a summary prepared earlier already serves that move
  (`prepared_summaries` finds them).

The summary itself (its request, its bound, its block) is `bot.context.compaction`'s. See
docs/context-window.md, The summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from bot.context.window import TurnCosts, WindowDecision, WindowLimits, moved_to, select_window
from bot.domain.records import StoredRecord, SummaryRecord


def predict_cut(costs: TurnCosts, limits: WindowLimits, margin: float) -> int | None:
    """The turn the window will start at after its next move, when that move is near.

    Near: the window would move were every limit `margin` smaller. The predicted start is
    where it would jump with those smaller limits and `margin` more headroom: the chat
    grows by at most about `margin` of a limit before the real move, so the move lands at
    or before the prediction and the window from the prepared summary still keeps the full
    headroom (`prepared_start_fits`). None when not near.
    """
    shrink = 1 - margin
    tighter = WindowLimits(
        token_budget=int(limits.token_budget * shrink) if limits.token_budget > 0 else 0,
        max_turns=max(1, int(limits.max_turns * shrink)),
        max_messages=max(1, int(limits.max_messages * shrink)),
        headroom=min(limits.headroom + margin, 0.9),
    )
    decision = select_window(
        costs.tokens, costs.messages, 0, tighter, answered=costs.answered or None
    )
    if not decision.moved or decision.start <= 0:
        return None
    return decision.start


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


# ---------------------------------------------------------------- the window's plan


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


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowPlan:
    """What a call does with its loaded window, decided before anything is projected again.

    `decision`: where the window starts (a turn of the loaded window) and what the move kept
    and left (`decision.moved` False: the start stays). `fold`: the turns before the new
    start are folded into a new summary now, in the member's turn (no prepared summary
    serves the move). `summary`: the summary shown after the breadcrumb; with a fold due,
    the last good one, which stays should the fold fail. `crumb`: earlier history is left
    out, so the breadcrumb is in. `persist`: the new start is stored.
    """

    decision: WindowDecision
    fold: bool
    summary: SummaryRecord | None
    crumb: bool
    persist: bool

    def after_fold(self, folded: SummaryRecord | None, *, failed: bool) -> WindowPlan:
        """The plan once the due fold ran. A failed fold keeps the last good summary and
        the move waits (the start is not stored), so nothing leaves the window for good:
        the next fold covers the last good summary and every record since."""
        if failed:
            return replace(self, fold=False, persist=False)
        return replace(self, fold=False, summary=folded)


def plan_window(
    decision: WindowDecision,
    costs: TurnCosts,
    limits: WindowLimits,
    *,
    earlier: bool,
    previous: SummaryRecord | None,
    prepared: Sequence[PreparedSummary] = (),
    compaction: bool,
    fold_now: bool = True,
    persist: bool = True,
) -> WindowPlan:
    """What to do with the window `select_window` decided on (`decision`, over `costs`).

    `earlier`: records precede the loaded window; `previous`: the summary covering them;
    `prepared`: summaries found inside the loaded window (looked up only when it moves);
    `compaction`: departing turns are folded (off: they leave with the breadcrumb alone);
    `fold_now`: the summary model may be called (a read-only preview does not); `persist`:
    a moved start may be stored.

    The start stays, and so does the summary, until a limit is exceeded: the cached prefix
    breaks once per move. A move uses a prepared summary when one serves it
    (`usable_summary`; the start moves onto it), else folds what departs now.
    """
    if not decision.moved:
        return WindowPlan(
            decision=decision, fold=False, summary=previous, crumb=earlier, persist=False
        )
    if not compaction:
        return WindowPlan(decision=decision, fold=False, summary=None, crumb=True, persist=persist)
    found = usable_summary(decision.start, prepared, costs, limits)
    if found is not None:
        if found.turn != decision.start:
            decision = moved_to(decision, costs, found.turn)
        return WindowPlan(
            decision=decision, fold=False, summary=found.summary, crumb=True, persist=persist
        )
    return WindowPlan(
        decision=decision,
        fold=fold_now,
        summary=previous if fold_now else None,
        crumb=True,
        persist=persist,
    )


# ---------------------------------------------------------------- offline summary
