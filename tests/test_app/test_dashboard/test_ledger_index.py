"""Day digests: the usage report's numbers, today read incrementally, closed days kept."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter, ledger_file
from bot.app.dashboard.ledger_index import LedgerIndex, range_totals
from bot.services.usage_report import load_report

TODAY = date(2026, 3, 10)


def entry(day: date, n: int, **fields: object) -> LedgerEntry:
    base: dict[str, object] = {
        "ts": datetime(day.year, day.month, day.day, 9, tzinfo=UTC) + timedelta(seconds=n),
        "session": n % 3,
        "chat": -(n % 3) - 1,
        "scene": "group",
        "turn_id": f"t{n // 2}",
        "iteration": n % 2 + 1,
        "provider": "default",
        "model": "m",
        "input_tokens": 1000 + 37 * n,
        "cached_tokens": 500 + n,
        "output_tokens": 20,
        "est_history": 300,
        "cost": 0.001,
    }
    base.update(fields)
    return LedgerEntry(**base)  # type: ignore[arg-type]


def write(traces: Path, entries: list[LedgerEntry]) -> None:
    writer = LedgerWriter(traces, UTC)
    for item in entries:
        writer.append(item)


def test_today_grows_line_by_line_and_matches_the_report(tmp_path: Path) -> None:
    index = LedgerIndex(tmp_path, UTC, today=lambda: TODAY)
    write(tmp_path, [entry(TODAY, n) for n in range(10)])
    first = index.digest(TODAY)
    assert first.row.calls == 10
    # a half-written line waits for its newline
    with ledger_file(tmp_path, TODAY).open("ab") as handle:
        handle.write(b'{"ts":"2026-03-10T10:00:00+00:00","chat":1')
    assert index.digest(TODAY).row.calls == 10
    with ledger_file(tmp_path, TODAY).open("ab") as handle:
        handle.write(b',"input_tokens":5}\n')
    write(tmp_path, [entry(TODAY, n, error="E: x" if n == 12 else None) for n in range(10, 15)])
    grown = index.digest(TODAY)
    assert grown.row == load_report(tmp_path, zone=UTC, days=[TODAY]).row_for(TODAY)
    assert grown.row.calls == 16
    assert grown.row.errors == 1


def test_a_closed_day_is_read_once_and_again_only_when_its_file_changes(tmp_path: Path) -> None:
    day = TODAY - timedelta(days=1)
    index = LedgerIndex(tmp_path, UTC, today=lambda: TODAY)
    write(tmp_path, [entry(day, n) for n in range(6)])
    first = index.digest(day)
    assert index.digest(day) is first
    write(tmp_path, [entry(day, 6, trims=())])
    assert index.digest(day).row.calls == 7
    assert index.digest(day).row == load_report(tmp_path, zone=UTC, days=[day]).row_for(day)


def test_a_range_takes_percentiles_over_every_call(tmp_path: Path) -> None:
    days = [TODAY - timedelta(days=2), TODAY - timedelta(days=1), TODAY]
    write(tmp_path, [entry(d, n) for i, d in enumerate(days) for n in range(i * 5, i * 5 + 5)])
    index = LedgerIndex(tmp_path, UTC, today=lambda: TODAY)
    totals = range_totals(index.digests(days))
    whole = load_report(tmp_path, zone=UTC, days=days).total
    assert totals.calls == whole.calls == 15
    assert (totals.input_p50, totals.input_p90) == (whole.input_p50, whole.input_p90)
    assert totals.cache_hit_rate == whole.cache_hit_rate
    assert (
        totals.billable_equivalent_tokens
        == whole.billable_input_tokens + 0.25 * whole.cached_tokens
    )


def test_a_chat_keeps_its_trims_and_newest_calls(tmp_path: Path) -> None:
    from bot.agent.ledger_trims import TrimInfo

    trim = TrimInfo(
        reason="token_budget",
        dropped_turns=1,
        dropped_messages=2,
        kept_turns=5,
        tokens_before=900,
        tokens_after=700,
        budget=800,
    )
    write(tmp_path, [entry(TODAY, n, trims=(trim,) if n == 3 else ()) for n in range(9)])
    digest = LedgerIndex(tmp_path, UTC, today=lambda: TODAY).digest(TODAY)
    chat = digest.chats[-1]  # n % 3 == 0
    assert [e.turn_id for e in chat.recent] == ["t0", "t1", "t3"]
    assert [e.trim for e in chat.trims] == [trim]
    assert digest.chats[-2].trims == ()


def test_a_range_is_the_reports_total_row_even_for_a_turn_across_midnight(tmp_path: Path) -> None:
    """One per-day merge: the dashboard's range is the usage report's total, field by field."""
    yesterday = TODAY - timedelta(days=1)
    late = datetime(yesterday.year, yesterday.month, yesterday.day, 23, 59, 59, tzinfo=UTC)
    write(
        tmp_path,
        [
            entry(yesterday, 0, ts=late, turn_id="across", session=1),
            entry(TODAY, 1, ts=late + timedelta(seconds=2), turn_id="across", session=1),
            entry(TODAY, 2, purpose="compaction", cost=0.01),
            entry(TODAY, 3, turn_id="", session=1),
        ],
    )
    index = LedgerIndex(tmp_path, UTC, today=lambda: TODAY)
    days = [yesterday, TODAY]
    totals = range_totals(index.digests(days))
    assert totals == load_report(tmp_path, zone=UTC, days=days).total
    assert totals.turns == 2  # "across" once, and the call without a turn id
    assert sum(d.row.turns for d in index.digests(days)) == 3  # per day it is on both
