"""The usage report's aggregation: days, turns, percentiles, shares, the chat filter."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from bot.agent.ledger_file import ledger_file
from bot.agent.ledger_read import read_entries
from bot.services.usage_report import (
    CallsPerTurn,
    build_report,
    drift_of_errors,
    load_report,
    percentile,
    report_days,
)
from tests.test_services.ledger_days import (
    D1,
    D2,
    DAY1,
    DAY2,
    SHANGHAI,
    at,
    call,
    write_ledger,
)


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([], 50, None),
        ([7], 50, 7),
        ([7], 90, 7),
        ([1, 2, 3, 4], 50, 2),
        ([1, 2, 3, 4], 90, 4),
        (list(range(1, 11)), 50, 5),
        (list(range(1, 11)), 90, 9),
        (list(range(1, 12)), 90, 10),
        (list(range(1, 101)), 90, 90),
    ],
    ids=[
        "empty",
        "one-p50",
        "one-p90",
        "four-p50",
        "four-p90",
        "ten-p50",
        "ten-p90",
        "eleven",
        "hundred",
    ],
)
def test_percentiles_are_nearest_rank(values: list[int], p: int, expected: int | None) -> None:
    assert percentile(values, p) == expected


def test_one_row_per_day_and_a_total() -> None:
    report = build_report(DAY1 + DAY2, zone=SHANGHAI, days=[D1, D2])
    first, second = report.days
    assert [r.label for r in report.days] == ["2026-03-01", "2026-03-02"]
    assert first.calls == 9
    assert first.turns == 3
    assert first.estimated_calls == 1
    # inputs: 1000, 3000, 4100 (estimate), 10000..10005 → nearest rank 5 of 9 and 9 of 9
    assert (first.input_p50, first.input_p90) == (10_001, 10_005)
    assert first.reported_input_tokens == 1_000 + 3_000 + sum(10_000 + i for i in range(6))
    assert first.cached_tokens == 500 + 6 * 8_000
    assert first.billable_input_tokens == first.reported_input_tokens - first.cached_tokens
    assert first.cache_hit_rate == pytest.approx(first.cached_tokens / first.reported_input_tokens)
    assert first.history_share == pytest.approx(9 * 2_000 / (9 * 4_000 + 100))
    assert first.fixed_share == pytest.approx(9 * 1_000 / (9 * 4_000 + 100))
    assert first.output_tokens == 10 + 20 + 6 * 5
    assert first.calls_per_turn == CallsPerTurn(one=1, two=1, six_plus=1, mean=3.0)
    assert (first.cap_turns, first.trims, first.errors) == (1, 1, 1)
    assert first.cost == pytest.approx(0.5)
    assert second.calls == 1
    assert second.turns == 1
    assert second.cost is None
    total = report.total
    assert (total.label, total.day) == ("total", None)
    assert total.calls == 10
    assert total.turns == 3  # turn c spans midnight: once in the total
    assert total.calls_per_turn == CallsPerTurn(one=1, two=1, six_plus=1, mean=10 / 3)
    # ten inputs: rank 5 and rank 9 (the 12,000 of day 2 is the 10th)
    assert (total.input_p50, total.input_p90) == (10_001, 10_005)


def test_the_chat_filter_keeps_one_chat() -> None:
    report = build_report(DAY1, zone=SHANGHAI, days=[D1], chat=-200)
    assert report.chat == -200
    assert report.total.calls == 1
    assert report.total.turns == 1


def test_empty_days_have_zero_counts_and_no_ratios() -> None:
    report = build_report([], zone=SHANGHAI, days=[D1])
    row = report.days[0]
    assert row.calls == 0
    assert row.input_p50 is None
    assert row.cache_hit_rate is None
    assert row.history_share is None
    assert row.calls_per_turn.mean is None
    assert report.row_for(D2).calls == 0


def test_calls_without_a_turn_id_are_one_call_turns() -> None:
    entries = [call(at(D1, 9), ""), call(at(D1, 10), "")]
    assert build_report(entries, zone=SHANGHAI, days=[D1]).total.calls_per_turn.one == 2


def test_load_report_reads_the_days_through_the_ledger_decoder(tmp_path: Path) -> None:
    write_ledger(tmp_path, DAY1 + DAY2)
    with ledger_file(tmp_path, D1).open("a") as f:
        f.write('not json\n{"ts": "2026-03-01T01:00:00+00:00", "input_tokens": "9"}\n')
    with ledger_file(tmp_path, D2).open("a") as f:
        f.write('{"ts": "2026-03-01T17:')
    loaded = load_report(tmp_path, zone=SHANGHAI, days=[D1, D2])
    scan = read_entries(tmp_path, start=D1, end=D2)
    built = build_report(scan, zone=SHANGHAI, days=[D1, D2])  # a scan brings its counts
    expected = build_report(DAY1 + DAY2, zone=SHANGHAI, days=[D1, D2])
    assert loaded.days == built.days == expected.days
    assert loaded.total == built.total == expected.total
    # a text token count is a corrupt line, the cut last line a partial one
    assert (loaded.corrupt_lines, loaded.partial_lines) == (2, 1)
    assert (built.corrupt_lines, built.partial_lines) == (2, 1)


@pytest.mark.parametrize(
    ("days", "since", "expected"),
    [
        (None, None, (date(2026, 3, 4), 7)),
        (1, None, (date(2026, 3, 10), 1)),
        (3, None, (date(2026, 3, 8), 3)),
        (None, date(2026, 3, 9), (date(2026, 3, 9), 2)),
        (None, date(2026, 3, 10), (date(2026, 3, 10), 1)),
    ],
    ids=["default-7", "one", "three", "since", "since-today"],
)
def test_report_days(days: int | None, since: date | None, expected: tuple[date, int]) -> None:
    selected = report_days(date(2026, 3, 10), days=days, since=since)
    assert (selected[0], len(selected)) == expected
    assert selected[-1] == date(2026, 3, 10)


def test_a_month_is_bucketed_by_zone_day(tmp_path: Path) -> None:
    start = at(D1, 0)
    entries = [call(start + timedelta(hours=h), f"t{h}") for h in range(0, 24 * 3, 5)]
    write_ledger(tmp_path, entries)
    days = [D1 + timedelta(days=i) for i in range(3)]
    report = load_report(tmp_path, zone=SHANGHAI, days=days)
    assert [r.calls for r in report.days] == [5, 5, 5]


def test_cache_writes_are_counted_priced_and_weighted() -> None:
    """Anthropic-shaped calls: 10k billed input = 2k uncached + 5k reads + 3k writes."""
    calls = [
        call(
            at(D1, 10, n),
            f"w{n}",
            input_tokens=10_000,
            cached_tokens=5_000,
            cache_write_tokens=3_000,
            output_tokens=100,
            cost=0.02,
            cache_write_cost=0.01,
        )
        for n in range(2)
    ]
    old_line = call(at(D1, 11), "old", input_tokens=4_000, cached_tokens=0, output_tokens=0)
    row = build_report([*calls, old_line], zone=SHANGHAI, days=[D1]).total
    assert row.cache_write_tokens == 6_000
    assert row.cache_write_rate == pytest.approx(6_000 / 24_000)
    assert row.billable_input_tokens == 24_000 - 10_000 - 6_000
    # uncached + 0.25 x reads + 1.25 x writes
    assert row.billable_equivalent_tokens == pytest.approx(8_000 + 0.25 * 10_000 + 1.25 * 6_000)
    assert row.cache_write_cost == pytest.approx(0.02)
    assert row.cache_write_share == pytest.approx(0.02 / 0.04)


def test_without_prices_the_write_share_is_of_the_billable_equivalent_input() -> None:
    line = call(at(D1, 10), "w", input_tokens=1_000, cached_tokens=0, cache_write_tokens=1_000)
    row = build_report([line], zone=SHANGHAI, days=[D1]).total
    assert row.cost is None
    assert row.cache_write_share == pytest.approx(1.0)
    assert row.billable_equivalent_tokens == pytest.approx(1_250)


def test_truncated_calls_are_counted() -> None:
    flagged = call(at(D1, 10), "t", input_tokens=2_048, input_truncated_by_provider=True)
    row = build_report([flagged, DAY1[0]], zone=SHANGHAI, days=[D1]).total
    assert row.truncated_calls == 1


def test_calls_a_budget_refused_are_counted_apart_and_in_no_other_figure() -> None:
    refused = call(
        at(D1, 11), "t9", input_tokens=None, cost=None, error="BudgetExceeded: …", refused="budget"
    )
    plain = build_report([DAY1[0]], zone=SHANGHAI, days=[D1]).total
    row = build_report([DAY1[0], refused], zone=SHANGHAI, days=[D1]).total
    assert row.refused_budget == 1
    assert (row.calls, row.turns, row.errors, row.cost) == (
        plain.calls,
        plain.turns,
        plain.errors,
        plain.cost,
    )


def test_drift_is_the_median_and_p90_of_the_absolute_error() -> None:
    errors = [0.1] * 8 + [0.3, 1.0]  # +10 % x8, -30 %, +100 %
    drift = drift_of_errors(errors)
    assert drift is not None
    assert drift.calls == 10
    assert drift.median == pytest.approx(0.10)
    assert drift.p90 == pytest.approx(0.30)
    assert drift_of_errors([]) is None
    single = drift_of_errors([0.1])
    assert single is not None
    assert (single.median, single.p90) == (pytest.approx(0.1), pytest.approx(0.1))
