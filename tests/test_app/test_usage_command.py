"""`tgbot usage report --json --days 1` over the ledger a running bot wrote today."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.agent.ledger_file import read_entries
from tests.test_app.conftest import Traffic, cli_env, tgbot

pytestmark = pytest.mark.slow  # `tgbot usage report`'s one real-process test


def snapshot(traffic: Traffic) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(traffic.data_dir)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in traffic.data_dir.rglob("*")
        if p.is_file()
    }


async def test_todays_report_as_json(traffic: Traffic) -> None:
    entries = list(read_entries(traffic.data_dir / "agent-traces"))
    assert len(entries) == len(traffic.model.requests) == 4  # 3 turns, one with a tool call
    before = snapshot(traffic)

    done = await tgbot("usage", "report", "--json", "--days", "1", env=cli_env(traffic.data_dir))
    assert done.code == 0, done.err
    report = json.loads(done.out)
    (today,) = report["days"]
    assert today["day"] == datetime.now(UTC).date().isoformat()
    assert (today["calls"], today["turns"]) == (4, 3)
    inputs = sorted(e.input_tokens or 0 for e in entries)
    assert today["input_per_call_p50"] == inputs[1]  # nearest rank of 4 values
    assert today["input_per_call_p90"] == inputs[3]
    history = sum(e.est_history for e in entries)
    estimated = sum(e.est_fixed + e.est_history + e.est_current + e.est_images for e in entries)
    assert today["history_share"] == round(history / estimated, 4)
    assert 0 < today["history_share"] < 1
    cached = sum(e.cached_tokens or 0 for e in entries)
    assert cached > 0  # the scripted model simulates a provider prefix cache
    assert today["cache_hit_rate"] == round(cached / sum(inputs), 4)
    assert today["calls_per_turn"] == {"1": 2, "2": 1, "3-5": 0, "6+": 0}
    assert today["cap_turns"] == 0
    assert report["total"]["calls"] == 4
    assert snapshot(traffic) == before  # read-only
