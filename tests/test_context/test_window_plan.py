"""The window's plan: keep the start, move onto a prepared summary, or move and fold; where
the next move will start (finding prepared summaries: test_prepared_summary.py)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from bot.context.prepared_summary import PreparedSummary, usable_summary
from bot.context.window import TurnCosts, WindowLimits, select_window
from bot.context.window_plan import WindowPlan, plan_window, predict_cut
from bot.domain.facts import Sender
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord

AT = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


def record(seq: int, message_id: int, text: str = "hi") -> StoredRecord:
    return StoredRecord(
        id=seq,
        session_id=1,
        parent_id=seq - 1 or None,
        created_at=AT,
        body=UserRecord(sender=Sender(id=1001, name="Alice"), text=text),
        message_ids=(message_id,),
        alias_seq=seq,
        alias_parts=(f"m{seq}",),
    )


# ---------------------------------------------------------------- the window's plan

LIMITS = WindowLimits(token_budget=100, max_turns=50, max_messages=100, headroom=0.25)
OLD = SummaryRecord(text="what came before", first_alias="m1", last_alias="m9")
READY = SummaryRecord(text="prepared after a reply", first_alias="m1", last_alias="m20")


def costs_of(tokens: list[int], messages: list[int] | None = None) -> TurnCosts:
    counts = messages or [2] * len(tokens)
    starts = tuple(itertools.accumulate([0, *counts[:-1]]))
    return TurnCosts(
        tokens=tuple(tokens),
        messages=tuple(counts),
        starts=starts,
        answered=(True,) * len(tokens),
    )


def plan_for(
    costs: TurnCosts,
    *,
    limits: WindowLimits = LIMITS,
    earlier: bool = True,
    previous: SummaryRecord | None = OLD,
    prepared: tuple[PreparedSummary, ...] = (),
    compaction: bool = True,
    fold_now: bool = True,
) -> WindowPlan:
    decision = select_window(
        costs.tokens, costs.messages, 0, limits, answered=costs.answered or None
    )
    return plan_window(
        decision,
        costs,
        limits,
        earlier=earlier,
        previous=previous,
        prepared=prepared,
        compaction=compaction,
        fold_now=fold_now,
        persist=fold_now,
    )


@pytest.mark.parametrize("earlier", [True, False], ids=["after a move", "from the root"])
def test_within_its_limits_the_window_and_its_summary_stay_as_they_are(earlier: bool) -> None:
    previous = OLD if earlier else None
    plan = plan_for(costs_of([10] * 10), earlier=earlier, previous=previous)
    assert not plan.decision.moved
    assert (plan.decision.start, plan.decision.dropped_turns) == (0, 0)
    assert plan.summary is previous  # the prefix the provider cached is byte-stable
    assert (plan.fold, plan.persist, plan.crumb) == (False, False, earlier)


def test_over_its_budget_the_window_moves_by_a_chunk_of_whole_turns_and_folds() -> None:
    costs = costs_of([10] * 11, messages=[1, 3, 2, 1, 4, 2, 2, 1, 1, 3, 1])
    plan = plan_for(costs)
    decision = plan.decision
    assert decision.moved
    assert decision.reason == "token_budget"
    # down to 75 % of the budget, at a turn boundary, in one jump
    assert decision.start == 4
    assert decision.tokens == 70
    assert decision.dropped_turns == 4
    assert decision.dropped_messages == sum(costs.messages[:4])  # whole turns, nothing split
    assert plan.fold
    assert plan.persist
    assert plan.crumb
    assert plan.summary is OLD  # shown should the fold fail


def test_a_growing_chat_moves_its_window_once_per_chunk_not_once_per_message() -> None:
    start, moves, calls_between = 0, 0, []
    since_move = 0
    for turns in range(1, 200):
        costs = costs_of([10] * turns)
        window = TurnCosts(
            tokens=costs.tokens[start:],
            messages=costs.messages[start:],
            starts=costs.starts[start:],
            answered=costs.answered[start:],
        )
        plan = plan_for(window)
        since_move += 1
        if plan.decision.moved:
            assert plan.persist
            start += plan.decision.start
            moves += 1
            calls_between.append(since_move)
            since_move = 0
    # turns of 10 tokens, a budget of 100: the first move comes at 110 tokens and keeps 70
    # (75 % of the budget, whole turns); from there every move waits for 4 more turns
    assert calls_between[0] == 11
    assert set(calls_between[1:]) == {4}
    assert moves == 1 + (199 - 11) // 4


def test_a_move_lands_on_a_summary_prepared_at_or_after_its_start() -> None:
    costs = costs_of([10] * 11)  # the move's own start is turn 4
    plan = plan_for(costs, prepared=(PreparedSummary(turn=5, summary=READY),))
    assert not plan.fold  # no model call in the member's turn
    assert plan.summary is READY
    assert (plan.decision.start, plan.decision.dropped_turns, plan.decision.tokens) == (5, 5, 60)
    assert plan.decision.dropped_messages == 10
    assert plan.persist


def test_a_summary_prepared_too_early_is_not_used_the_move_folds_now() -> None:
    # from turn 2 the window would be 90 tokens: the next move would come within two turns
    plan = plan_for(costs_of([10] * 11), prepared=(PreparedSummary(turn=2, summary=READY),))
    assert (plan.fold, plan.summary, plan.decision.start) == (True, OLD, 4)


@pytest.mark.parametrize(
    ("turn", "serves"),
    [(5, True), (4, True), (3, True), (1, False)],
    ids=["after the cut", "at the cut", "a little early, still in headroom", "too early"],
)
def test_the_next_move_is_served_by_a_summary_prepared_near_its_predicted_start(
    turn: int, serves: bool
) -> None:
    costs = costs_of([10] * 9 + [5])  # 95 of 100 tokens: within 10 % of the budget
    predicted = predict_cut(costs, LIMITS, 0.1)
    assert predicted == 4  # aimed at 65 % of a budget 10 % smaller: the move lands before it
    prepared = (PreparedSummary(turn=turn, summary=READY),)
    found = usable_summary(predicted, prepared, costs, LIMITS)
    assert (found is not None) == serves  # from turn 3: 65 tokens; from turn 1: 85


def test_of_several_prepared_summaries_the_newest_that_serves_wins() -> None:
    older = SummaryRecord(text="older", first_alias="m1", last_alias="m12")
    prepared = (PreparedSummary(turn=4, summary=older), PreparedSummary(turn=6, summary=READY))
    plan = plan_for(costs_of([10] * 11), prepared=prepared)
    assert (plan.summary, plan.decision.start) == (READY, 6)


def test_a_failed_fold_keeps_the_last_good_summary_and_the_move_waits() -> None:
    plan = plan_for(costs_of([10] * 11))
    failed = plan.after_fold(None, failed=True)
    assert (failed.fold, failed.summary, failed.persist) == (False, OLD, False)
    assert failed.decision == plan.decision  # this request is still sent the moved window
    folded = plan.after_fold(READY, failed=False)
    assert (folded.fold, folded.summary, folded.persist) == (False, READY, True)
    nothing = plan.after_fold(None, failed=False)  # nothing departing had an alias
    assert (nothing.summary, nothing.persist) == (None, True)


def test_without_compaction_a_move_leaves_the_breadcrumb_alone() -> None:
    plan = plan_for(costs_of([10] * 11), compaction=False)
    assert plan.decision.moved
    assert (plan.fold, plan.summary, plan.crumb, plan.persist) == (False, None, True, True)


def test_a_read_only_preview_never_folds_and_never_stores_the_start() -> None:
    plan = plan_for(costs_of([10] * 11), fold_now=False)
    assert plan.decision.moved
    assert (plan.fold, plan.summary, plan.persist) == (False, None, False)
    ready = plan_for(
        costs_of([10] * 11), fold_now=False, prepared=(PreparedSummary(turn=4, summary=READY),)
    )
    assert (ready.fold, ready.summary, ready.persist) == (False, READY, False)
