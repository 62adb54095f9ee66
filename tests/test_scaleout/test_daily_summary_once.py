"""Every worker's scheduler fires the daily summary; the claim in the shared database lets
exactly one of them send it."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.services.daily_summary import DailySummary
from storage.engine import create_engine_for
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.test_scaleout.conftest import fresh_postgres

OWNER = 42
WORKERS = 4


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_workers_firing_for_the_same_day_send_exactly_once(
    backend: str, tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url if backend == "sqlite" else await fresh_postgres()
    stores = [SqlStore(create_engine_for(url)) for _ in range(WORKERS)]
    messengers = [RecordingMessenger() for _ in range(WORKERS)]
    clock = SteppingClock(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    summaries = [
        DailySummary(tmp_path / "traces", ZoneInfo("UTC"), OWNER, m, s, clock, locale="en")
        for m, s in zip(messengers, stores, strict=True)
    ]
    try:
        first = await asyncio.gather(*(s.send_yesterday() for s in summaries))
        again = await asyncio.gather(*(s.send_yesterday() for s in summaries))
        clock.advance(24 * 3600)
        next_day = await asyncio.gather(*(s.send_yesterday() for s in summaries))
    finally:
        for store in stores:
            await store.close()

    assert sorted(first) == [False] * (WORKERS - 1) + [True]
    assert again == [False] * WORKERS
    assert sorted(next_day) == [False] * (WORKERS - 1) + [True]
    texts = sorted(t for m in messengers for t in m.texts(OWNER))
    assert len(texts) == 2
    assert texts[0].startswith(f"Usage for {date(2026, 11, 30).isoformat()}")
    assert texts[1].startswith(f"Usage for {date(2026, 12, 1).isoformat()}")
