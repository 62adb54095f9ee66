"""The usage report's billable-equivalent input and its estimate-vs-reported drift per route,
in the aggregation, the table, the JSON and over a real ledger file."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.services.usage_render import render_table, run_usage_report, to_json
from bot.services.usage_report import build_report

DAY = date(2026, 3, 1)
NEXT = date(2026, 3, 2)


def _line(
    day: date,
    *,
    reported: int | None,
    estimate: int = 10_000,
    corrected: int | None = None,
    cached: int = 0,
    route: tuple[str, str] = ("deepseek", "deepseek-chat"),
) -> LedgerEntry:
    return LedgerEntry(
        ts=datetime(day.year, day.month, day.day, 6, 0, tzinfo=UTC),
        session=1,
        chat=-100,
        scene="group",
        turn_id=f"t{estimate}{reported}",
        provider=route[0],
        model=route[1],
        input_tokens=reported,
        cached_tokens=cached if reported is not None else None,
        output_tokens=10,
        est_fixed=estimate // 2,
        est_history=estimate - estimate // 2,
        est_corrected=corrected,
    )


def _errors_line(day: date, reported: list[int], **kw: object) -> list[LedgerEntry]:
    return [_line(day, reported=r, **kw) for r in reported]  # type: ignore[arg-type]


def test_drift_per_route_is_the_median_and_p90_of_the_absolute_error() -> None:
    # deepseek: reported 10 % under our 10,000 on nine calls, 50 % under on one
    lines = _errors_line(DAY, [9_091] * 9 + [6_667])
    # a second route the estimate matches, with the corrected estimate on its lines
    lines += _errors_line(DAY, [10_000] * 4, corrected=10_000, route=("qwen", "qwen-plus"))
    lines.append(_line(DAY, reported=None))  # an error: nothing to compare
    report = build_report(lines, zone=UTC, days=[DAY])
    deepseek, qwen = report.total.drift
    assert deepseek.route == "deepseek/deepseek-chat"
    assert deepseek.raw.calls == 10
    assert deepseek.raw.median == pytest.approx(0.1, abs=1e-3)
    assert deepseek.raw.p90 == pytest.approx(0.1, abs=1e-3)  # the 50 % call is the 10th
    assert deepseek.corrected is None  # older lines carry no corrected estimate
    assert qwen.route == "qwen/qwen-plus"
    assert (qwen.raw.median, qwen.raw.p90) == (0.0, 0.0)
    assert qwen.corrected is not None
    assert qwen.corrected.calls == 4


def test_the_corrected_column_shows_what_the_correction_fixed() -> None:
    lines = [_line(DAY, reported=8_000, corrected=8_100 + 10 * n) for n in range(20)]
    (drift,) = build_report(lines, zone=UTC, days=[DAY]).total.drift
    assert drift.raw.p90 == pytest.approx(0.25)  # 10,000 vs 8,000
    assert drift.corrected is not None
    # nearest rank: the 18th of 20 corrected estimates, 8,270 vs 8,000
    assert drift.corrected.p90 == pytest.approx(270 / 8_000)


def test_days_have_their_own_drift_and_the_total_merges_them() -> None:
    lines = _errors_line(DAY, [8_000] * 3) + _errors_line(NEXT, [10_000] * 3)
    report = build_report(lines, zone=UTC, days=[DAY, NEXT, date(2026, 3, 3)])
    assert report.row_for(DAY).drift[0].raw.median == pytest.approx(0.25)
    assert report.row_for(NEXT).drift[0].raw.median == 0
    assert report.row_for(date(2026, 3, 3)).drift == ()
    assert report.total.drift[0].raw.calls == 6


def test_billable_equivalent_input_counts_a_cached_token_as_a_quarter() -> None:
    lines = [
        _line(DAY, reported=10_000, cached=8_000),  # 2,000 + 2,000
        _line(DAY, reported=6_000, cached=0),  # 6,000
        _line(DAY, reported=None),  # not reported: left out
    ]
    row = build_report(lines, zone=UTC, days=[DAY]).total
    assert row.billable_equivalent_tokens == pytest.approx(10_000)
    assert row.billable_equivalent_per_call == pytest.approx(5_000)
    assert row.billable_input_tokens == 8_000
    empty = build_report([], zone=UTC, days=[DAY]).total
    assert empty.billable_equivalent_per_call is None


def test_the_table_and_the_json_show_both() -> None:
    lines = _errors_line(DAY, [8_000] * 5, corrected=8_050, cached=4_000)
    report = build_report(lines, zone=UTC, days=[DAY])
    table = render_table(report)
    assert "bill-eq/call" in table
    assert "5.0k" in table  # 4,000 + 0.25 x 4,000
    assert "Estimate vs reported input, per route" in table
    drift_row = next(line for line in table.splitlines() if "deepseek/deepseek-chat" in line)
    assert drift_row.split()[1:] == ["5", "25.0%", "25.0%", "0.6%", "0.6%"]
    assert max(len(line) for line in table.splitlines()) <= 100
    data = json.loads(to_json(report))
    assert data["total"]["billable_equivalent_input_tokens"] == 25_000
    assert data["total"]["billable_equivalent_per_call"] == 5_000
    assert data["drift"] == [
        {
            "route": "deepseek/deepseek-chat",
            "calls": 5,
            "raw_median": 0.25,
            "raw_p90": 0.25,
            "corrected_calls": 5,
            "corrected_median": 0.0063,
            "corrected_p90": 0.0063,
        }
    ]


def test_tgbot_usage_report_reads_est_corrected_from_the_ledger(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, UTC)
    for n in range(10):
        writer.append(_line(DAY, reported=9_000, corrected=9_000 + n))
    out = io.StringIO()
    code = run_usage_report(
        tmp_path, zone=UTC, today=DAY, days=1, since=None, as_json=True, chat=None, out=out
    )
    assert code == 0
    (drift,) = json.loads(out.getvalue())["drift"]
    assert drift["calls"] == 10
    assert drift["raw_p90"] == pytest.approx(0.1111, abs=1e-4)
    assert drift["corrected_p90"] == pytest.approx(8 / 9_000, abs=1e-4)  # the 9th of 10
