"""What the store lock's join probe costs each message on PostgreSQL (issue 51, item 9).

Run: `scripts/with-postgres .venv/bin/python -m bench.bench_store_lock [--rounds 60]`
(else `--postgres-url URL`). Every message a webhook worker stores takes its chat's "store"
advisory lock; since messages are stored in Telegram's order across workers, the statement
that takes it also asks whether a worker holds the chat's "join" lock
(`storage.postgres.locks.AdvisoryChatLock.hold_store`). This times, on one lock connection, the
statement and its release, three ways, interleaved in blocks of 50 so the machine's noise
falls on all of them alike: the lock alone (before), the lock with the try-and-give-back
probe (now), and the lock with a `pg_locks` lookup (the first version, kept for
comparison). Rows with no other advisory lock held and with 150 held (busy workers: one
per chat with a turn or a store in flight), since reading `pg_locks` grows with them.
Prints medians of the blocks in microseconds per take and release.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.postgres.locks import advisory_key, create_lock_engine

LOCK = text("SELECT pg_advisory_lock(:id)")
UNLOCK = text("SELECT pg_advisory_unlock(:id)")
PROBE = text(
    "SELECT CASE WHEN pg_try_advisory_lock(:peek) THEN NOT pg_advisory_unlock(:peek)"
    " ELSE true END FROM (SELECT pg_advisory_lock(:id)) AS held"
)
SCAN = text(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = :high AND objid = :low AND objsubid = 1)"
    " FROM (SELECT pg_advisory_lock(:id)) AS held"
)
BLOCK = 50
OTHERS = (0, 150)


async def _block(conn: AsyncConnection, statement: TextClause, params: dict[str, Any]) -> float:
    """Microseconds per take and release, over one block."""
    started = time.perf_counter()
    for _ in range(BLOCK):
        await conn.execute(statement, params)
        await conn.execute(UNLOCK, {"id": params["id"]})
    return (time.perf_counter() - started) / BLOCK * 1e6


async def run(url: str, rounds: int) -> list[str]:
    engine, others = create_lock_engine(url), create_lock_engine(url)
    lock_id, peek = advisory_key("bench", "store"), advisory_key("bench", "join")
    unsigned = peek & 0xFFFF_FFFF_FFFF_FFFF
    ways: dict[str, tuple[TextClause, dict[str, Any]]] = {
        "lock alone (before)": (LOCK, {"id": lock_id}),
        "lock + try-and-give-back probe (now)": (PROBE, {"id": lock_id, "peek": peek}),
        "lock + pg_locks lookup (first version)": (
            SCAN,
            {"id": lock_id, "high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF},
        ),
    }
    lines = []
    try:
        async with engine.connect() as plain:
            conn = await plain.execution_options(isolation_level="AUTOCOMMIT")
            for held in OTHERS:
                holders = []
                for n in range(held):
                    holder = await (await others.connect()).execution_options(
                        isolation_level="AUTOCOMMIT"
                    )
                    await holder.execute(LOCK, {"id": advisory_key("bench", "other", n)})
                    holders.append(holder)
                times: dict[str, list[float]] = {name: [] for name in ways}
                for _ in range(rounds):
                    for name, (statement, params) in ways.items():
                        times[name].append(await _block(conn, statement, params))
                base = statistics.median(times["lock alone (before)"])
                for name, spent in times.items():
                    median = statistics.median(spent)
                    lines.append(
                        f"{held:3d} other locks held | {name:40s} {median:6.0f} us"
                        f" ({median - base:+.0f} us)"
                    )
                for holder in holders:
                    await holder.close()
    finally:
        await engine.dispose()
        await others.dispose()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--postgres-url", default=os.environ.get("TEST_POSTGRES_URL"))
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    if not args.postgres_url:
        sys.exit("no --postgres-url given and TEST_POSTGRES_URL is unset")
    for line in asyncio.run(run(args.postgres_url, args.rounds)):
        print(line)


if __name__ == "__main__":
    main()
