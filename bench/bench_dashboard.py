"""Dashboard benchmark: every page at 100,000 stored records and a month of ledger.

Run: `.venv/bin/python -m bench.bench_dashboard [--quick]`. A SQLite file holds 40 group
chats of 2,500 records each (turns of a member message, a tool call, its result and a
reply; the window start 150 records before the leaf), and the traces directory holds the
usage benchmark's month of 200,000 ledger lines (`bench_report.write_month`). The dashboard
is wired as `tgbot dashboard` wires it and asked over HTTP (aiohttp's test client, in
process), with "now" on the month's last day.

- cold: the first request of a fresh process, before the background warm-up of the last
  31 days has finished (the overview then reads every day file once);
- warm: the median of repeats afterwards;
- growing: the overview while today's file grows by 50 lines before every request (the bot
  is running): closed days come from their digests, today is read incrementally.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import insert, update

from bench.bench_report import DAYS, FIRST_DAY, ZONE, write_month
from bench.bench_storage import WINDOW_BACK, _turn_record, bulk_rows
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.app.dashboard.server import build_application, open_dashboard
from bot.config import load_settings
from bot.domain.ids import SessionKey
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from storage.tables import MESSAGES, PLATFORM_MESSAGES, SESSIONS

CHATS = 40
RECORDS = 100_000
LINES = 200_000
REPEATS = 9
TARGET_MS = 300.0


@dataclass(frozen=True, slots=True)
class PageTime:
    page: str
    cold_ms: float
    warm_ms: float

    @property
    def ok(self) -> bool:
        return self.warm_ms <= TARGET_MS


async def seed_store(url: str, *, chats: int, records: int) -> list[int]:
    """`chats` sessions sharing `records` records; returns their chat ids."""
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url))
    engine = create_engine_for(url)
    per_chat = records // chats
    chat_ids = [-1000 - n for n in range(1, chats + 1)]
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    try:
        for n, chat in enumerate(chat_ids):
            sid = (
                await store.open_session(SessionKey(chat_id=chat), scene="group", title=f"team {n}")
            ).id
            offset = n * per_chat
            rows: list[dict[str, Any]] = []
            events: list[dict[str, Any]] = []
            for i in range(per_chat):
                body, ids = _turn_record(i)
                ids = tuple(None if m is None else m + n * 10_000_000 for m in ids)
                record, event = bulk_rows(
                    sid,
                    chat,
                    body,
                    ids,
                    at=t0 + timedelta(seconds=i * 20),
                    record_id=offset + i + 1,
                )
                if i == 0:
                    record["parent_id"] = None  # each chat's path starts at its own root
                rows.append(record)
                if event is not None:
                    events.append(event)
            async with engine.begin() as conn:
                await conn.execute(insert(MESSAGES), rows)
                await conn.execute(insert(PLATFORM_MESSAGES), events)
                await conn.execute(
                    update(SESSIONS)
                    .where(SESSIONS.c.id == sid)
                    .values(
                        active_leaf_id=offset + per_chat,
                        window_start_id=offset + per_chat - WINDOW_BACK,
                    )
                )
            await store.load_history(sid, max_records=220)  # derive the alias cache once
    finally:
        await engine.dispose()
        await store.close()
    return chat_ids


async def _measure(data_dir: Path, chat: int, repeats: int) -> tuple[list[PageTime], float]:
    today = FIRST_DAY + timedelta(days=DAYS - 1)
    now = datetime(today.year, today.month, today.day, 23, 0, tzinfo=ZONE).astimezone(UTC)
    settings = load_settings(data_dir=data_dir, bot_timezone="Asia/Shanghai", bot_locale="en")
    board = open_dashboard(settings, now=lambda: now)
    pages = [
        ("/ (14 days)", "/"),
        ("/ (30 days)", f"/?from={FIRST_DAY.isoformat()}"),
        ("/chats", "/chats"),
        (f"/chats/{chat}", f"/chats/{chat}"),
        ("/metrics", "/metrics"),
        ("/healthz", "/healthz"),
    ]
    results = []
    try:
        async with TestClient(TestServer(build_application(board))) as client:

            async def timed(path: str) -> float:
                started = time.perf_counter()
                response = await client.get(path)
                await response.read()
                elapsed = (time.perf_counter() - started) * 1000
                assert response.status == 200, (path, response.status)
                return elapsed

            for label, path in pages:
                cold = await timed(path)
                warm = statistics.median([await timed(path) for _ in range(repeats)])
                results.append(PageTime(label, cold, warm))
            writer = LedgerWriter(settings.traces_dir, settings.zone)
            growing = []
            for round_ in range(repeats):
                for i in range(50):
                    writer.append(
                        LedgerEntry(
                            ts=now - timedelta(seconds=i),
                            session=1,
                            chat=chat,
                            scene="group",
                            turn_id=f"live-{round_}-{i}",
                            provider="p",
                            model="m",
                            input_tokens=9_000,
                            cached_tokens=7_000,
                            output_tokens=100,
                        )
                    )
                growing.append(await timed(f"/?from={FIRST_DAY.isoformat()}"))
    finally:
        await board.store.close()
    return results, statistics.median(growing)


async def _run(records: int, lines: int, repeats: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        started = time.perf_counter()
        chats = await seed_store(
            f"sqlite+aiosqlite:///{data_dir / 'tgbot.sqlite3'}", chats=CHATS, records=records
        )
        write_month(data_dir / "agent-traces", lines=lines)
        seeded = time.perf_counter() - started
        pages, growing = await _measure(data_dir, chats[0], repeats)
    return table(pages, growing, records=records, lines=lines, seeded=seeded)


def table(
    pages: Sequence[PageTime], growing: float, *, records: int, lines: int, seeded: float
) -> str:
    rows = [
        f"| {p.page} | {p.cold_ms:.0f} ms | {p.warm_ms:.0f} ms | {'PASS' if p.ok else 'FAIL'} |"
        for p in pages
    ]
    rows.append(
        f"| / (30 days), today's file growing 50 lines per request | | {growing:.0f} ms "
        f"| {'PASS' if growing <= TARGET_MS else 'FAIL'} |"
    )
    return "\n".join(
        [
            f"## Dashboard pages at {records:,} stored records ({CHATS} chats) and "
            f"{lines:,} ledger lines ({DAYS} days)",
            "",
            f"Target: each page within ~{TARGET_MS:.0f} ms (warm). Cold is the first request "
            f"of a fresh process. Seeding took {seeded:.0f} s.",
            "",
            "| page | cold | warm (median) | |",
            "|---|---:|---:|---|",
            *rows,
        ]
    )


def run(records: int = RECORDS, lines: int = LINES, repeats: int = REPEATS) -> str:
    return asyncio.run(_run(records, lines, repeats))


if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    print(run(10_000, 20_000, 3) if quick else run())
