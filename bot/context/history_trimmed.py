"""The `HistoryTrimmed` event: what a trim or a window move dropped, told to log and subscribers.

The trims themselves live in `bot.context.history_trim` (`TrimResult`) and the window in
`bot.context.window` (`WindowDecision`); this is only the fact they report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.context.history_trim import TrimReason, TrimResult
    from bot.context.window import WindowDecision, WindowLimits


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryTrimmed:
    """Emitted on every trim, on every path: to the log, the ledger and subscribers.

    Every token figure is our estimate, the unit trims count in (a route's real tokens are
    on `ModelCalled`: `budget`, `history_budget`). `budget` is what the history was held to:
    for a window move its token limit (the scene budget clamped to what the runtime budget
    leaves, less the summary's reserve; 0 when the window has no token limit), for a
    proactive trim the request's budget less the tool schemas, after an overflow two thirds
    of the estimate. `session` is the session's id (`SessionInfo.id`) and `turn_id` the turn
    that trimmed.
    """

    dropped_messages: int
    dropped_turns: int
    kept_turns: int
    reason: TrimReason
    tokens_before: int
    tokens_after: int
    budget: int
    session: int
    turn_id: str

    @classmethod
    def from_result(
        cls, result: TrimResult, *, reason: TrimReason, budget: int, session: int, turn_id: str
    ) -> HistoryTrimmed:
        return cls(
            dropped_messages=result.dropped_messages,
            dropped_turns=result.dropped_turns,
            kept_turns=result.kept_turns,
            reason=reason,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            budget=budget,
            session=session,
            turn_id=turn_id,
        )

    @classmethod
    def from_window(
        cls, decision: WindowDecision, limits: WindowLimits, *, session: int, turn_id: str
    ) -> HistoryTrimmed:
        """The event for a window move under `limits`; only a decision that moved has a
        reason."""
        if decision.reason is None:
            raise ValueError("the window did not move: there is nothing to report")
        return cls(
            dropped_messages=decision.dropped_messages,
            dropped_turns=decision.dropped_turns,
            kept_turns=decision.kept_turns,
            reason=decision.reason,
            tokens_before=decision.tokens_before,
            tokens_after=decision.tokens,
            budget=limits.token_budget,
            session=session,
            turn_id=turn_id,
        )
