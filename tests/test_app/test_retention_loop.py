"""Retention: keep everything by default; prune old events and pre-window records when set."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from bot.app.retention_loop import RetentionPolicy, apply_retention, retention_loop
from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import UserRecord
from bot.ports import NewRecord
from testkit.memory_store import InMemoryStore
from tests.deadlines import EVENT, deadline
from tests.fakes import SteppingClock

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ANN = Sender(id=1, name="Ann")


async def stored(store: InMemoryStore) -> int:
    session = await store.open_session(SessionKey(chat_id=5), scene="private")
    for n in range(1, 5):
        at = NOW - timedelta(days=100 - n)
        await store.append(
            session.id,
            [NewRecord(body=UserRecord(sender=ANN, text=f"m{n}"), created_at=at, message_ids=(n,))],
            platform_messages=[
                PlatformMessage(chat_id=5, message_id=n, sender_id=1, date=at, text=f"m{n}")
            ],
        )
    path = await store.load_path(session.id)
    await store.set_window_start(session.id, path[-1].id)
    return session.id


async def test_the_default_keeps_everything() -> None:
    store = InMemoryStore()
    sid = await stored(store)
    assert await apply_retention(store, RetentionPolicy(), NOW) is None
    assert len(await store.load_path(sid)) == 4
    assert await store.find_platform_message(5, 1) is not None


async def test_old_events_and_records_before_the_window_go() -> None:
    store = InMemoryStore()
    sid = await stored(store)
    policy = RetentionPolicy(keep_records_days=30, keep_platform_events_days=30)
    await apply_retention(store, policy, NOW)
    assert [r.body.text for r in await store.load_path(sid)] == ["m4"]  # type: ignore[union-attr]
    assert await store.find_platform_message(5, 1) is None


async def test_events_only_keeps_every_record() -> None:
    store = InMemoryStore()
    sid = await stored(store)
    await apply_retention(store, RetentionPolicy(keep_platform_events_days=30), NOW)
    assert len(await store.load_path(sid)) == 4
    assert await store.find_platform_message(5, 4) is None


async def test_the_loop_prunes_at_start_and_stops_when_told() -> None:
    store = InMemoryStore()
    sid = await stored(store)
    stop = asyncio.Event()
    task = asyncio.create_task(
        retention_loop(store, RetentionPolicy(keep_records_days=30), SteppingClock(NOW), stop=stop)
    )
    for _ in range(50):
        if len(await store.load_path(sid)) == 1:
            break
        await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, deadline(EVENT))
    assert len(await store.load_path(sid)) == 1
