"""Two InboundServices on one database stand in for two workers (in one process): with the
chat lock, a message given to both is stored once, turns of a chat never overlap, and the
stored order per chat is the order messages were accepted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app.wiring import App
from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.ports import ChatLock
from bot.services.turn_scheduler import LocalChatLock
from storage.engine import create_engine_for
from storage.postgres.locks import AdvisoryChatLock
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, inbound
from tests.rig import rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.probes import OverlapProbe, tag

START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
CHATS = (101, 102, 103)
PER_CHAT = 6


@dataclass
class Worker:
    app: App
    store: SqlStore
    lock: ChatLock
    messenger: RecordingMessenger


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def workers(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_url: str
) -> AsyncIterator[tuple[Worker, Worker]]:
    probe = OverlapProbe()
    if request.param == "sqlite":
        url = sqlite_url
        shared = LocalChatLock()
        locks: tuple[ChatLock, ChatLock] = (shared, shared)
    else:
        url = await fresh_postgres()
        locks = (AdvisoryChatLock.for_url(url), AdvisoryChatLock.for_url(url))
    pair = []
    for n, lock in enumerate(locks):
        settings = rig_settings(tmp_path / f"w{n}", database_url=url)
        store = SqlStore(create_engine_for(url))
        messenger = RecordingMessenger(next_id=10_000 * (n + 1))
        app = wire_app(settings, store=store, messenger=messenger, model=probe, chat_lock=lock)
        pair.append(Worker(app, store, lock, messenger))
    try:
        yield pair[0], pair[1]
    finally:
        for worker in pair:
            await worker.app.inbound.drain()
            await worker.app.routes.aclose()
            await worker.store.close()
        for lock in dict.fromkeys(locks):
            await lock.aclose()
    assert probe.overlaps == 0


def _message(chat: int, n: int) -> object:
    return inbound(
        chat_id=chat,
        chat_type="private",
        sender=Sender(id=chat, name=f"U{chat}"),
        message_id=n,
        text=tag(chat, n),
        at=START + timedelta(seconds=n),
    )


async def test_doubled_deliveries_are_stored_once_in_order_and_answered_once(
    workers: tuple[Worker, Worker],
) -> None:
    async def chat_traffic(chat: int) -> None:
        for n in range(1, PER_CHAT + 1):
            message = _message(chat, n)
            # like a load balancer: alternate workers; every third update is a retry to both
            targets = workers if n % 3 == 0 else (workers[n % 2],)
            await asyncio.gather(*(w.app.inbound.on_message(message) for w in targets))  # type: ignore[arg-type]

    await asyncio.gather(*(chat_traffic(chat) for chat in CHATS))
    for worker in workers:
        await worker.app.inbound.drain()

    store = workers[0].store
    for chat in CHATS:
        session = await store.find_session(SessionKey(chat_id=chat))
        assert session is not None
        path = await store.load_path(session.id)
        users = [r.message_ids[0] for r in path if isinstance(r.body, UserRecord)]
        assert users == list(range(1, PER_CHAT + 1)), chat
        answered = [m.reply_to for w in workers for m in w.messenger.sent if m.chat_id == chat]
        # merged turns answer several messages with one reply: no trigger twice, the last
        # message always answered, and no reply left unstored
        assert len(answered) == len(set(answered))
        assert PER_CHAT in answered
        assert sum(r.kind == "assistant" for r in path) == len(answered)
