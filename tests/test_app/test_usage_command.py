"""`tgbot usage report --json --days 1` over the ledger a running bot wrote today; its
feedback read from the database as the dashboard reads it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.agent.ledger_read import read_entries
from bot.app.usage_command import feedback_source
from bot.ports import StoredReaction
from storage.engine import create_engine_for, create_readonly_engine
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from tests.rig import rig_settings
from tests.test_app.conftest import Traffic, cli_env, tgbot


def snapshot(traffic: Traffic) -> dict[str, tuple[int, int]]:
    """Every file's size and time; the WAL index (`-shm`, shared memory every reader of a
    live database marks, as the dashboard does) by its size only."""
    return {
        str(p.relative_to(traffic.data_dir)): (
            p.stat().st_size,
            0 if p.name.endswith("-shm") else p.stat().st_mtime_ns,
        )
        for p in traffic.data_dir.rglob("*")
        if p.is_file()
    }


@pytest.mark.slow  # `tgbot usage report`'s one real-process test
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


async def test_the_report_counts_the_reactions_the_dashboard_shows(tmp_path: Path) -> None:
    """A running bot's newest reactions are still in its write-ahead log: the report reads
    them as the dashboard does (one read-only open), not only what reached the file."""
    settings = rig_settings(tmp_path)
    url = settings.resolved_database_url
    await upgrade_database(url)
    at = datetime(2026, 3, 1, 6, tzinfo=UTC)
    bot = SqlStore(create_engine_for(url))  # the running bot: its writes wait in the WAL
    dashboard = SqlStore(create_readonly_engine(url))
    try:
        reaction = StoredReaction(chat_id=-100, message_id=1, user_id=7, emoji="👍", created_at=at)
        await bot.record_reactions([reaction])
        assert (tmp_path / "tgbot.sqlite3-wal").stat().st_size > 0
        read = feedback_source(settings)
        assert read is not None
        day = at.astimezone(settings.zone).date()
        reported = await asyncio.to_thread(lambda: list(read([day])))
        shown = await dashboard.reactions_between(at - timedelta(hours=1), at + timedelta(hours=1))
        assert reported == [(r.created_at, r.chat_id, r.emoji) for r in shown]
        assert [(chat, emoji) for _, chat, emoji in reported] == [(-100, "👍")]
    finally:
        await dashboard.close()
        await bot.close()
