"""Prepared summaries: which hang right before a turn of the window, and which serves a move."""

from __future__ import annotations

from dataclasses import replace

from bot.context.prepared_summary import PreparedSummary, prepared_summaries, usable_summary
from bot.domain.records import StoredRecord, SummaryRecord
from tests.test_context.test_window_plan import LIMITS, READY, costs_of, record


def test_prepared_summaries_are_the_ones_hanging_right_before_a_turn() -> None:
    records = [record(seq, 500 + seq) for seq in range(1, 9)]
    turn_starts = [0, 2, 4, 6]  # record index of each turn's first record

    def hanging(seq: int, under: int | None, text: str = "s") -> StoredRecord:
        return replace(
            record(seq, 0),
            parent_id=under,
            body=SummaryRecord(text=text, first_alias="m1", last_alias=f"m{under}"),
        )

    found = [
        hanging(101, 2),  # under record 2 (index 1): before turn 1
        hanging(102, 3),  # under record 3: record 4 starts no turn
        hanging(103, 6, text=""),  # an empty answer is no summary
        hanging(104, 6),  # before turn 3
        hanging(105, 99),  # under a record outside the window
    ]
    prepared = prepared_summaries(found, records, turn_starts)
    assert [p.turn for p in prepared] == [1, 3]
    assert [p.summary for p in prepared] == [found[0].body, found[3].body]


def test_usable_summary_is_none_when_nothing_prepared_serves_the_move() -> None:
    costs = costs_of([10] * 11)
    assert usable_summary(4, (), costs, LIMITS) is None
    assert usable_summary(4, (PreparedSummary(turn=1, summary=READY),), costs, LIMITS) is None
