"""Where a call's window starts, and when its next move folds: the window plan, pure.

- `plan_window`: what a call does with its window: keep the start, or move it onto a prepared
  summary, or move it and fold what departs now; which summary follows the breadcrumb.
- `predict_cut`: where the window start will jump at the next move, when that move is near
  (whether a summary prepared earlier already serves that move:
  `bot.context.prepared_summary`).

The summary itself (its request, its bound, its block) is `bot.context.compaction`'s. See
docs/context-window.md, The summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from bot.context.prepared_summary import PreparedSummary, usable_summary
from bot.context.window import TurnCosts, WindowDecision, WindowLimits, moved_to, select_window
from bot.domain.records import SummaryRecord


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


# ---------------------------------------------------------------- the window's plan


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
