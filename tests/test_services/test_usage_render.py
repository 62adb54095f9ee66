"""The usage report on screen: the table, JSON, and the `tgbot usage report` command."""

from __future__ import annotations

import io
import json
from datetime import UTC, date
from pathlib import Path

import pytest

from bot.agent.ledger_file import ledger_file
from bot.services.usage_render import render_table, run_usage_report, to_json
from bot.services.usage_report import UsageReport, build_report
from tests.test_services.ledger_days import D1, D2, DAY1, DAY2, SHANGHAI, at, call, write_ledger


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


def test_the_table_and_json_show_calls_a_budget_refused(tmp_path: Path) -> None:
    refused = call(at(D1, 11), "r", input_tokens=None, error="BudgetExceeded: …", refused="budget")
    write_ledger(tmp_path, [DAY1[0], refused])
    code, text = run(tmp_path, today=D1, days=1)
    assert code == 0
    assert "refused: budget 1 calls" in text
    code, text = run(tmp_path, today=D1, days=1, as_json=True)
    assert json.loads(text)["total"]["refused"] == {"budget": 1}


def test_the_table_and_json_show_cache_writes_and_their_share(tmp_path: Path) -> None:
    written = call(
        at(D1, 10),
        "w",
        input_tokens=10_000,
        cached_tokens=5_000,
        cache_write_tokens=3_000,
        output_tokens=100,
        cost=0.02,
        cache_write_cost=0.01,
    )
    truncated = call(at(D1, 11), "t", input_tokens=2_048, input_truncated_by_provider=True)
    write_ledger(tmp_path, [written, truncated])
    code, text = run(tmp_path, today=D1, days=1)
    assert code == 0
    header = next(line for line in text.splitlines() if line.lstrip().startswith("day "))
    assert " hit " in header
    assert " write " in header
    day = next(line for line in text.splitlines() if line.lstrip().startswith("2026-03-01"))
    assert " 25% " in day  # 3k writes of 12k reported input
    assert "cache writes: 3.0k tokens, 50% of the cost" in text
    assert "num_ctx" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    code, out = run(tmp_path, today=D1, days=1, as_json=True)
    total = json.loads(out)["total"]
    assert total["cache_write_tokens"] == 3_000
    assert total["cache_write_rate"] == round(3_000 / 12_048, 4)
    assert total["cache_write_cost"] == 0.01
    assert total["cache_write_share"] == 0.5
    assert total["truncated_calls"] == 1


def test_the_cost_carries_the_configured_currency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[ledger] currency` (here `LEDGER__CURRENCY`) names what every cost is counted in."""
    from bot.app.usage_command import usage_report

    write_ledger(tmp_path / "agent-traces", DAY1 + DAY2)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_TIMEZONE", "Asia/Shanghai")
    monkeypatch.setenv("LEDGER__CURRENCY", "EUR")
    out = io.StringIO()
    assert usage_report(None, days=3650, since="2026-03-01", as_json=True, chat=None, out=out) == 0
    assert json.loads(out.getvalue())["currency"] == "EUR"
    out = io.StringIO()
    assert usage_report(None, days=0, since="2026-03-01", as_json=False, chat=None, out=out) == 0
    assert "cost EUR" in out.getvalue()
    code, text = run(tmp_path / "agent-traces", as_json=True)
    assert code == 0
    assert json.loads(text)["currency"] is None  # none given: the figures alone


def test_reasoning_one_hour_writes_and_stops_in_the_table_and_the_json(tmp_path: Path) -> None:
    thought = {"input_tokens": 5_000, "output_tokens": 900, "reasoning_tokens": 700}
    write_ledger(
        tmp_path,
        [
            call(at(D2, 9), "a", stop="refusal", **thought),
            call(
                at(D2, 10),
                "b",
                stop="length",
                cache_write_tokens=1_000,
                cache_write_1h_tokens=800,
                **thought,
            ),
            call(at(D2, 11), "c", stop="end", input_tokens=5_000, output_tokens=100),
        ],
    )
    code, text = run(tmp_path)
    assert code == 0
    assert "reasoning: 1.4k of the 1.9k output tokens" in text
    assert "1-hour cache writes: 800 tokens" in text
    assert "stops: 1 refused, 1 cut at the output limit" in text
    code, out = run(tmp_path, as_json=True)
    total = json.loads(out)["total"]
    assert (total["reasoning_tokens"], total["cache_write_1h_tokens"]) == (1_400, 800)
    assert (total["refusals"], total["cut_at_length"]) == (1, 1)
