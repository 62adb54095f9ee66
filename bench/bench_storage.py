"""Storage benchmark: `load_history` cost against history size, and inbound inserts per second.

Run: `.venv/bin/python -m bench.bench_storage` (SQLite in a temp directory). For each size a
session's active path holds that many records, bulk-inserted: turns of a user message with a
platform id, an assistant tool call, its results, and a reply (every fifth one in two
bubbles). The window start sits 150 records before the leaf and `load_history` asks for 200.

- steady: median of repeated loads (the alias cache is warm);
- fresh instance: the first load of a new `SqlStore` on the same file (nothing to rebuild:
  the alias cache lives in the rows);
- rebuild: the first load after the alias cache was cleared (bulk import), one pass over
  the path's id / parent / message-id columns;
- inbound/s: `append` of one user record with its platform message, sequentially.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, update

from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.messages import ToolCall
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import (
    AssistantRecord,
    RecordBody,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.ports import NewRecord
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.payload import encode_message_ids, encode_payload, first_message_id
from storage.sql import SqlStore
from storage.tables import MESSAGES, PLATFORM_MESSAGES, SESSIONS

CHAT = -1001234567890123
WINDOW_BACK = 150
MAX_RECORDS = 200
REPEATS = 15
INBOUND = 300
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PEOPLE = [Sender(id=10_000 + i, name=f"member{i}") for i in range(12)]


def _turn_record(index: int) -> tuple[RecordBody, tuple[int | None, ...]]:
    """Record `index` of a repeating four-record turn, with its platform ids."""
    turn, step = divmod(index, 4)
    base = 3_000_000_000 + turn * 3  # ids past 32 bits
    if step == 0:
        text = f"message {turn}: can someone check the build?"
        return UserRecord(sender=PEOPLE[turn % len(PEOPLE)], text=text), (base,)
    if step == 1:
        call = ToolCall(id=f"c{turn}", name="search", arguments='{"q": "build status"}')
        return AssistantRecord(tool_calls=(call,)), ()
    if step == 2:
        result = ToolResult(call_id=f"c{turn}", name="search", content="green " * 40)
        return ToolResultsRecord(results=(result,)), ()
    ids = (base + 1, base + 2) if turn % 5 == 0 else (base + 1,)
    return AssistantRecord(text="The build is green. " * 6), ids


def bulk_rows(
    sid: int,
    chat: int,
    body: RecordBody,
    ids: tuple[int | None, ...],
    *,
    at: datetime,
    record_id: int,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A record row (child of `record_id - 1`, no alias cache yet) and, for a user message
    with a platform id, its platform-message row: what a bulk `insert` seeds."""
    record = {
        "id": record_id,
        "session_id": sid,
        "parent_id": record_id - 1 or None,
        "kind": body.kind,
        "created_at": at,
        "payload": encode_payload(body, ids),
        "tokens": 20,
        "first_message_id": first_message_id(ids),
        "message_ids": encode_message_ids(ids),
        "alias_seq": None,
        "alias_last": None,
    }
    if not isinstance(body, UserRecord) or ids[0] is None:
        return record, None
    event = {
        "chat_id": chat,
        "message_id": ids[0],
        "thread_id": 0,
        "sender_id": body.sender.id,
        "sender_name": body.sender.name,
        "is_bot": False,
        "date": at,
        "text": body.text,
        "media": "[]",
        "record_id": record_id,
    }
    return record, event


async def build_session(store: SqlStore, url: str, size: int) -> int:
    """A session with `size` records on one path, bulk-inserted without the alias cache."""
    sid = (await store.open_session(SessionKey(chat_id=CHAT), scene="group")).id
    engine = create_engine_for(url)
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for i in range(size):
        body, ids = _turn_record(i)
        record, event = bulk_rows(
            sid, CHAT, body, ids, at=T0 + timedelta(seconds=i), record_id=i + 1
        )
        rows.append(record)
        if event is not None:
            events.append(event)
    try:
        async with engine.begin() as conn:
            await conn.execute(insert(MESSAGES), rows)
            await conn.execute(insert(PLATFORM_MESSAGES), events)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == sid)
                .values(active_leaf_id=size, window_start_id=size - WINDOW_BACK)
            )
    finally:
        await engine.dispose()
    return sid


async def _timed_load(store: SqlStore, sid: int) -> float:
    start = time.perf_counter()
    history = await store.load_history(sid, max_records=MAX_RECORDS)
    elapsed = time.perf_counter() - start
    assert len(history.records) == WINDOW_BACK + 1
    return elapsed


async def _measure(size: int, workdir: Path) -> dict[str, float]:
    url = f"sqlite+aiosqlite:///{workdir / f'bench-{size}.sqlite3'}"
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url))
    try:
        sid = await build_session(store, url, size)
        rebuild = await _timed_load(store, sid)
        steady = statistics.median([await _timed_load(store, sid) for _ in range(REPEATS)])
    finally:
        await store.close()
    fresh_store = SqlStore(create_engine_for(url))
    try:
        fresh = await _timed_load(fresh_store, sid)
        start = time.perf_counter()
        for n in range(INBOUND):
            mid = 9_000_000_000 + n
            record = NewRecord(
                body=UserRecord(sender=PEOPLE[0], text=f"inbound {n}"),
                created_at=T0,
                message_ids=(mid,),
                tokens=5,
            )
            event = PlatformMessage(
                chat_id=CHAT, message_id=mid, sender_id=PEOPLE[0].id, date=T0, text="x"
            )
            await fresh_store.append(sid, [record], platform_messages=[event])
        inbound = INBOUND / (time.perf_counter() - start)
    finally:
        await fresh_store.close()
    return {"steady": steady, "fresh": fresh, "rebuild": rebuild, "inbound": inbound}


async def _run(sizes: Sequence[int]) -> str:
    lines = [
        f"load_history(max_records={MAX_RECORDS}), window start {WINDOW_BACK} records before"
        " the leaf; SQLite file, WAL",
        "",
        "| records | steady (median) | fresh instance | alias rebuild | inbound appends/s |",
        "|---:|---:|---:|---:|---:|",
    ]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-") as tmp:
        for size in sizes:
            results[size] = found = await _measure(size, Path(tmp))
            lines.append(
                f"| {size:,} | {found['steady'] * 1000:.2f} ms | {found['fresh'] * 1000:.2f} ms"
                f" | {found['rebuild'] * 1000:.1f} ms | {found['inbound']:,.0f} |"
            )
    if len(sizes) > 1:
        ratio = results[max(sizes)]["steady"] / results[min(sizes)]["steady"]
        lines += ["", f"steady {max(sizes):,} / {min(sizes):,}: {ratio:.2f}x (target <= 2x)"]
    return "\n".join(lines)


def run(sizes: Sequence[int] = (1_000, 10_000, 100_000)) -> str:
    """The benchmark as a markdown table."""
    return asyncio.run(_run(sizes))


if __name__ == "__main__":
    print(run())
