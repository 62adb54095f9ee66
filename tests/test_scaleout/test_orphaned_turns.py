"""The orphaned-turn scan on PostgreSQL, with two in-process workers (each its own store
and advisory-lock pool, as two processes have): a turn whose chat lock a live worker holds
is not orphaned; a turn nobody holds is answered once, even with both workers scanning at
the same moment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.app.wiring import App
from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.ports import NewRecord
from bot.services.inbound_rules import BotIdentity
from storage.engine import create_engine_for
from storage.postgres.locks import AdvisoryChatLock
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import BOT_ID, rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=12)
ALICE = Sender(id=1001, name="Alice")
KEY = SessionKey(chat_id=ALICE.id)
IDENTITY = BotIdentity(id=BOT_ID, username="helper_bot")
ANSWER = "Answered by a survivor."


@dataclass
class Workers:
    apps: list[App]
    locks: list[AdvisoryChatLock]
    clock: SteppingClock
    messenger: RecordingMessenger
    model: ScriptedModel

    async def scan(self) -> int:
        """Both workers scan at once; how many turns they started (then run them out)."""
        started = await asyncio.gather(
            *(app.recovery.recover_orphans(IDENTITY, grace=GRACE) for app in self.apps)
        )
        for app in self.apps:
            await app.inbound.drain()
        return sum(started)


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Workers]:
    """Two workers on a fresh database whose private chat with Alice ends with her "hi"
    (message 7, a minute old): the turn a third, killed, worker was running."""
    url = await fresh_postgres()
    clock = SteppingClock(NOW)
    messenger = RecordingMessenger()
    model = ScriptedModel([Reply(ANSWER), Reply("Answered twice!")])
    stores = [SqlStore(create_engine_for(url)) for _ in range(2)]
    locks = [AdvisoryChatLock.for_url(url) for _ in range(2)]
    apps = [
        wire_app(
            rig_settings(tmp_path / f"w{n}", database_url=url),
            store=store,
            messenger=messenger,
            model=model,
            clock=clock,
            chat_lock=lock,
        )
        for n, (store, lock) in enumerate(zip(stores, locks, strict=True))
    ]
    session = await stores[0].open_session(KEY, scene="private")
    hi = NewRecord(
        body=UserRecord(sender=ALICE, text="hi"),
        created_at=NOW - timedelta(minutes=1),
        message_ids=(7,),
    )
    await stores[0].append(session.id, [hi])
    try:
        yield Workers(apps, locks, clock, messenger, model)
    finally:
        for app in apps:
            await app.inbound.drain()
            await app.routes.aclose()
        for store in stores:
            await store.close()
        for lock in locks:
            await lock.aclose()


async def test_a_turn_a_live_worker_holds_the_lock_of_is_not_orphaned(workers: Workers) -> None:
    assert await workers.scan() == 0  # first seen waiting now
    workers.clock.advance(GRACE.total_seconds())
    async with workers.locks[0].hold(KEY, scope="turn"):  # worker 0 is running this turn
        assert await workers.scan() == 0
        assert await workers.scan() == 0
    assert workers.messenger.sent == []
    assert workers.model.requests == []


async def test_an_orphaned_turn_is_answered_once_by_two_racing_scanners(
    workers: Workers,
) -> None:
    assert await workers.scan() == 0
    workers.clock.advance(GRACE.total_seconds())
    assert await workers.scan() >= 1  # both may start it; it runs only while unanswered
    workers.clock.advance(GRACE.total_seconds())
    assert await workers.scan() == 0

    assert [(m.text, m.reply_to) for m in workers.messenger.sent] == [(ANSWER, 7)]
    assert len(workers.model.requests) == 1
