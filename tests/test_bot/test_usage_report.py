from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.ledger import LedgerEntry, LedgerWriter, TrimInfo, ledger_file, read_entries
from bot.services.usage_report import (
    CallsPerTurn,
    UsageReport,
    build_report,
    load_report,
    percentile,
    render_table,
    report_days,
    run_usage_report,
    to_json,
)

SHANGHAI = ZoneInfo("Asia/Shanghai")
D1 = date(2026, 3, 1)
D2 = date(2026, 3, 2)
TRIM = TrimInfo(
    reason="token_budget",
    dropped_turns=1,
    dropped_messages=2,
    kept_turns=9,
    tokens_before=9_000,
    tokens_after=7_000,
    budget=8_000,
)


def at(day: date, hour: int, minute: int = 0) -> datetime:
    """A moment on `day` in Shanghai, as UTC (what the writer stores)."""
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=SHANGHAI).astimezone(UTC)


def call(ts: datetime, turn: str, **changes: object) -> LedgerEntry:
    values: dict[str, object] = {
        "ts": ts,
        "session": 1,
        "chat": -100,
        "scene": "group",
        "turn_id": turn,
        "provider": "deepseek",
        "model": "deepseek-chat",
        "est_fixed": 1_000,
        "est_history": 2_000,
        "est_current": 1_000,
    }
    values.update(changes)
    return LedgerEntry(**values)  # type: ignore[arg-type]


# Day 1 (Shanghai): turn a = 1 call, turn b = 2 calls (one estimated), turn c = 6 calls
# (hits the cap; one call is in another chat). 00:10 Shanghai is still the previous UTC day.
DAY1 = [
    call(at(D1, 0, 10), "a", input_tokens=1_000, cached_tokens=500, output_tokens=10, cost=0.5),
    call(at(D1, 9), "b", input_tokens=3_000, cached_tokens=0, output_tokens=20, trim=TRIM),
    call(at(D1, 9, 1), "b", iteration=2, est_images=100, error="ProviderUnavailable: 502"),
    *[
        call(
            at(D1, 23, 50),
            "c",
            iteration=i + 1,
            input_tokens=10_000 + i,
            cached_tokens=8_000,
            output_tokens=5,
            hit_iteration_cap=i == 5,
            chat=-200 if i == 0 else -100,
        )
        for i in range(6)
    ],
]
# Day 2: turn c continues past midnight (counts on both days, once in the total).
DAY2 = [call(at(D2, 0, 5), "c", iteration=7, purpose="final_summary", input_tokens=12_000)]


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


def write_ledger(traces: Path, entries: list[LedgerEntry]) -> None:
    writer = LedgerWriter(traces, SHANGHAI)
    for e in entries:
        writer.append(e)


def test_the_fast_reader_agrees_with_the_entry_path(tmp_path: Path) -> None:
    write_ledger(tmp_path, DAY1 + DAY2)
    with ledger_file(tmp_path, D1).open("a") as f:
        f.write('not json\n{"ts": "2026-03-01T01:00:00+00:00", "input_tokens": "9"}\n')
    with ledger_file(tmp_path, D2).open("a") as f:
        f.write('{"ts": "2026-03-01T17:')
    fast = load_report(tmp_path, zone=SHANGHAI, days=[D1, D2])
    scan = read_entries(tmp_path, start=D1, end=D2)
    slow = build_report(scan, zone=SHANGHAI, days=[D1, D2])  # a scan brings its counts
    assert (fast.corrupt_lines, fast.partial_lines) == (2, 1)
    assert fast.days == slow.days
    assert fast.total == slow.total
    # the entry path rejects the text token count while parsing, the fast path while reading
    assert (slow.corrupt_lines, slow.partial_lines) == (2, 1)


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


def run(traces: Path, **kwargs: object) -> tuple[int, str]:
    out = io.StringIO()
    options: dict[str, object] = {
        "zone": SHANGHAI,
        "today": D2,
        "days": 2,
        "since": None,
        "as_json": False,
        "chat": None,
        "out": out,
    }
    options.update(kwargs)
    code = run_usage_report(traces, **options)  # type: ignore[arg-type]
    return code, out.getvalue()


def test_the_command_prints_a_table(tmp_path: Path) -> None:
    write_ledger(tmp_path, DAY1 + DAY2)
    code, text = run(tmp_path)
    assert code == 0
    assert "2026-03-01" in text
    assert "total" in text
    assert "\x1b[" not in text
    assert "10.0k" in text  # p50 of day 1
    assert max(len(line) for line in text.splitlines()) <= 100


def test_the_command_prints_json(tmp_path: Path) -> None:
    write_ledger(tmp_path, DAY1 + DAY2)
    code, text = run(tmp_path, as_json=True, chat=-100)
    assert code == 0
    data = json.loads(text)
    assert data["zone"] == "Asia/Shanghai"
    assert data["chat"] == -100
    assert [d["day"] for d in data["days"]] == ["2026-03-01", "2026-03-02"]
    assert data["days"][0]["calls_per_turn"] == {"1": 1, "2": 1, "3-5": 1, "6+": 0}
    assert data["total"]["calls"] == 9
    assert data["percentiles"] == "nearest-rank"


def test_a_missing_directory_prints_an_empty_report_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "data" / "agent-traces"
    code, text = run(missing, as_json=True)
    assert code == 0
    assert json.loads(text)["total"]["calls"] == 0
    assert not (tmp_path / "data").exists()


def test_the_command_is_read_only_and_reads_only_the_days_asked(tmp_path: Path) -> None:
    write_ledger(tmp_path, DAY1 + DAY2)
    ledger_file(tmp_path, date(2026, 2, 28)).write_text("garbage outside the range\n")
    before = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir()}
    code, text = run(tmp_path, as_json=True)
    assert code == 0
    assert json.loads(text)["corrupt_lines"] == 0
    after = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir()}
    assert after == before


@pytest.mark.parametrize(
    "kwargs",
    [{"days": 0}, {"days": None, "since": date(2026, 3, 5)}],
    ids=["zero-days", "since-future"],
)
def test_a_bad_span_is_a_usage_error(tmp_path: Path, kwargs: dict[str, object]) -> None:
    code, text = run(tmp_path, **kwargs)
    assert code == 2
    assert text.startswith("error:")


def test_an_unreadable_day_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    write_ledger(tmp_path, DAY2)
    ledger_file(tmp_path, D1).mkdir()  # reading it fails with an OSError, even as root
    code, text = run(tmp_path)
    assert code == 1
    assert text.startswith("error: cannot read the ledger")


def test_a_terminal_gets_the_table_too(tmp_path: Path) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    write_ledger(tmp_path, DAY1)
    out = Terminal()
    code, _ = run(tmp_path, out=out)
    assert code == 0
    assert "total" in out.getvalue()


def test_render_and_json_show_skipped_lines() -> None:
    report = UsageReport(
        zone="UTC",
        days=(),
        total=build_report([], zone=UTC, days=[]).total,
        corrupt_lines=2,
        partial_lines=1,
    )
    assert "skipped 2 corrupt and 1 partial" in render_table(report)
    assert json.loads(to_json(report))["partial_lines"] == 1


def test_a_month_is_bucketed_by_zone_day(tmp_path: Path) -> None:
    start = at(D1, 0)
    entries = [call(start + timedelta(hours=h), f"t{h}") for h in range(0, 24 * 3, 5)]
    write_ledger(tmp_path, entries)
    days = [D1 + timedelta(days=i) for i in range(3)]
    report = load_report(tmp_path, zone=SHANGHAI, days=days)
    assert [r.calls for r in report.days] == [5, 5, 5]
