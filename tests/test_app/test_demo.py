"""`tgbot demo` end to end: real aiogram client, fake Bot API on 127.0.0.1, offline model."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.app.cli import main
from bot.app.demo import DEMO_MARKER, prepare_demo_dir, scenario_start
from bot.app.demo_scenario import build_scenario
from tests.test_app.conftest import DemoRun


def _check_output(out: str) -> None:
    assert out.startswith("What is simulated: the model is scripted")
    assert "Telegram is a fake Bot API on http://127.0.0.1:" in out
    assert "=== One request as the model saw it" in out
    assert "[Turn context]" in out
    assert "=== Usage report" in out
    # the system prompt's real size, not the size of an already shortened copy
    system = re.search(r"\[0\] system, (\d+) tokens\n.*?\((\d+) chars in all\)", out, re.S)
    assert system is not None
    assert int(system[2]) > 2_000
    comparison = out.split("=== Naive baseline vs ours")[1]
    row = re.search(r"input/call p50\s+([\d,]+)\s+([\d,]+)", comparison)
    assert row is not None
    naive, ours = (int(v.replace(",", "")) for v in row.groups())
    assert ours * 5 < naive
    hits = re.search(r"cache hit rate\s+(\d+)%\s+(\d+)%", comparison)
    assert hits is not None
    assert int(hits[2]) > int(hits[1])
    # the takeaway says the measured figures in one sentence
    said = re.search(
        r"Takeaway: .*≈(\d+)× fewer input tokens per call .*\(p50 ([\d,]+) vs ([\d,]+)\)"
        r".* (\d+)% of the time vs (\d+)%\.\n",
        comparison,
    )
    assert said is not None
    assert int(said[1]) == round(naive / ours)
    assert (int(said[4]), int(said[5])) == (int(hits[2]), int(hits[1]))
    assert "dashboard" in out.split("Try: ")[1]
    assert re.search(r"\nDone in [\d.]+ s, start-up included\.", out)
    # the header times run on after the bot's first reply (its replies are stamped in the
    # scenario's time, not at the wall clock's now, ahead of every later message)
    request = out.split("=== One request as the model saw it")[1].split("=== Usage report")[0]
    headers = re.findall(r"^\[id:m\d+;[^\n]*\]$", request, re.MULTILINE)
    first_reply = next(i for i, h in enumerate(headers) if "user_id:" not in h)
    assert any(";time:" in h for h in headers[first_reply + 1 :]), headers


def _demo_day(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The usage report's day of the demo's calls: one day, today, or yesterday when
    midnight passed since the demo ran."""
    assert main(["usage", "report", "--json", "--days", "2"]) == 0
    days = [day for day in json.loads(capsys.readouterr().out)["days"] if day["calls"]]
    assert len(days) == 1, [day["day"] for day in days]
    only: dict[str, Any] = days[0]
    return only


def test_demo_prints_the_request_the_report_and_the_comparison(
    demo_run: DemoRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _check_output(demo_run.done.out)
    data = demo_run.copy_to(tmp_path / "demo")
    assert (data / "tgbot.sqlite3").is_file()
    assert list((data / "agent-traces").glob("*.jsonl"))

    monkeypatch.setenv("DATA_DIR", str(data))
    today = _demo_day(capsys)
    assert today["calls"] > 50
    for key in ("input_per_call_p50", "input_per_call_p90", "history_share", "cache_hit_rate"):
        assert today[key] > 0
    assert sum(today["calls_per_turn"].values()) == today["turns"]

    # what lets a second run replay from scratch (it died with an IndexError: the replayed
    # message ids were taken for re-deliveries of the first run's rows): the directory the
    # demo wrote is emptied of its database and ledger, and stays marked as the demo's
    prepare_demo_dir(data)
    assert sorted(p.name for p in data.iterdir()) == [DEMO_MARKER]


@pytest.mark.slow  # two whole demo runs; the test above checks what the second one relies on
def test_a_second_demo_run_on_the_same_directory_replays_from_scratch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "demo"
    monkeypatch.setenv("DATA_DIR", str(data))
    assert main(["demo", "--data-dir", str(data)]) == 0
    capsys.readouterr()
    first_calls = _demo_day(capsys)["calls"]
    assert main(["demo", "--data-dir", str(data)]) == 0
    _check_output(capsys.readouterr().out)
    again = _demo_day(capsys)["calls"]
    assert first_calls * 0.9 < again < first_calls * 1.1  # one run's ledger, not two


def test_the_demo_leaves_a_bots_own_data_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tgbot.sqlite3").write_bytes(b"a real bot's database")
    assert main(["demo", "--data-dir", str(tmp_path)]) == 2
    assert "the demo did not write (tgbot.sqlite3)" in capsys.readouterr().err
    assert (tmp_path / "tgbot.sqlite3").read_bytes() == b"a real bot's database"


def test_the_scenario_ends_a_minute_before_now_when_today_has_room_for_it() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    scenario = build_scenario(bot_username="demo_helper_bot")
    start = scenario_start(now, scenario, UTC)
    last = start + timedelta(seconds=sum(line.seconds_after for line in scenario))
    assert last == now - timedelta(minutes=1)


@pytest.mark.parametrize("zone", [UTC, ZoneInfo("Asia/Shanghai"), ZoneInfo("America/New_York")])
def test_in_the_small_hours_the_scenario_still_falls_on_today(zone: ZoneInfo) -> None:
    # at 00:20 the conversation (about six hours long) cannot end in the past and start
    # today: it starts at 00:01, so `tgbot usage report --days 1` finds it
    now = datetime(2026, 12, 5, 0, 20, tzinfo=zone).astimezone(UTC)
    scenario = build_scenario(bot_username="demo_helper_bot")
    start = scenario_start(now, scenario, zone)
    last = start + timedelta(seconds=sum(line.seconds_after for line in scenario))
    assert start.astimezone(zone) == datetime(2026, 12, 5, 0, 1, tzinfo=zone)
    assert last.astimezone(zone).date() == now.astimezone(zone).date()
    assert last > now


@pytest.mark.slow  # a whole demo run
def test_without_a_data_dir_the_demo_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "the temporary data is removed" in out
    assert "--data-dir DIR" in out
    assert list(tmp_path.iterdir()) == []
