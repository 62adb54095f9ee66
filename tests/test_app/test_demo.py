"""`tgbot demo` end to end: real aiogram client, fake Bot API on 127.0.0.1, offline model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.app.cli import main


def test_demo_prints_the_request_the_report_and_the_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "demo"
    assert main(["demo", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "=== One request as the model saw it" in out
    assert "[Turn context]" in out
    assert "=== Usage report" in out
    comparison = out.split("=== Naive baseline vs ours")[1]
    row = re.search(r"input/call p50\s+([\d,]+)\s+([\d,]+)", comparison)
    assert row is not None
    naive, ours = (int(v.replace(",", "")) for v in row.groups())
    assert ours * 5 < naive
    hits = re.search(r"cache hit rate\s+(\d+)%\s+(\d+)%", comparison)
    assert hits is not None
    assert int(hits[2]) > int(hits[1])
    assert (data / "tgbot.sqlite3").is_file()
    assert list((data / "agent-traces").glob("*.jsonl"))

    monkeypatch.setenv("DATA_DIR", str(data))
    assert main(["usage", "report", "--json", "--days", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    today = report["days"][-1]
    assert today["calls"] > 50
    for key in ("input_per_call_p50", "input_per_call_p90", "history_share", "cache_hit_rate"):
        assert today[key] > 0
    assert sum(today["calls_per_turn"].values()) == today["turns"]
