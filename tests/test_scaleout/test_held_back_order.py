"""A chat's messages are stored in Telegram's order across two workers (issue 51, item 9).

Two InboundServices on one database stand in for two webhook workers (in one process, so
the race is set up exactly, not hoped for): on SQLite they share a `LocalChatLock`, on
PostgreSQL each has its own `AdvisoryChatLock`, as two `tgbot run --webhook` processes do.

The race: Alice addresses the bot on worker A, Bob addresses it there too while Alice's turn
waits out its merge window, so Bob's message is held back until Alice's turn answered. While
that turn runs (the model is held), Bob's next message and Carol's reach worker B. Before,
B stored them at once, ahead of Bob's earlier message; now B sees that messages wait to join
the chat (the "join" lock, reported by the store lock) and holds them back too, without
waiting on the turn itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app.wiring import App
from bot.domain.facts import InboundMessage, Sender
from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord, UserRecord
from bot.ports import ChatLock, LLMRequest, LLMResponse
from bot.services.turn_scheduler import LocalChatLock
from storage.engine import create_engine_for
from storage.postgres.locks import AdvisoryChatLock
from storage.sql import SqlStore
from tests.deadlines import EVENT, deadline
from tests.fakes import RecordingMessenger, inbound
from tests.rig import rig_settings, wire_app
from tests.test_reliability.conftest import GatedModel
from tests.test_scaleout.conftest import fresh_postgres

GROUP = -100777
START = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
ALICE = Sender(id=501, name="Alice")
BOB = Sender(id=502, name="Bob")
CAROL = Sender(id=503, name="Carol")


@dataclass
class Worker:
    app: App
    store: SqlStore
    messenger: RecordingMessenger

    async def handle(self, message: InboundMessage) -> None:
        """One webhook update; handling never waits on a turn, so this returns while the
        model is held (a hang here fails on the event deadline)."""
        await asyncio.wait_for(self.app.inbound.on_message(message), deadline(EVENT))

    def merge_window(self, seconds: float) -> None:
        self.app.inbound.turns.merge_window_seconds = seconds


class FirstCallHeld(GatedModel):
    """Answers "ok"; the first call (Alice's turn) waits at `gate`."""

    def __init__(self) -> None:
        super().__init__(lambda _request: LLMResponse(text="ok"), self._first)
        self.calls = 0

    def _first(self, _request: LLMRequest) -> bool:
        self.calls += 1
        return self.calls == 1


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def workers(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_url: str
) -> AsyncIterator[tuple[Worker, Worker, FirstCallHeld]]:
    model = FirstCallHeld()
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
        app = wire_app(settings, store=store, messenger=messenger, model=model, chat_lock=lock)
        pair.append(Worker(app, store, messenger))
    try:
        yield pair[0], pair[1], model
    finally:
        model.gate.set()
        for worker in pair:
            await worker.app.inbound.drain()
            await worker.app.routes.aclose()
            await worker.store.close()
        for lock in dict.fromkeys(locks):
            await lock.aclose()


def _message(n: int, sender: Sender, *, addressed: bool) -> InboundMessage:
    return inbound(
        chat_id=GROUP,
        message_id=n,
        update_id=7000 + n,
        sender=sender,
        text=f"@Helper m{n}" if addressed else f"m{n}",
        mentions_bot=addressed,
        at=START + timedelta(seconds=n),
    )


async def test_messages_held_back_on_one_worker_keep_telegrams_order_on_the_other(
    workers: tuple[Worker, Worker, FirstCallHeld],
) -> None:
    a, b, model = workers
    for worker in (a, b):
        worker.merge_window(3600)  # Alice's turn waits out its window until Bob hurries it
    await a.handle(_message(1, ALICE, addressed=True))
    await a.handle(_message(2, BOB, addressed=True))  # held back behind Alice's turn
    await asyncio.wait_for(model.held.wait(), deadline(EVENT))  # Alice's turn is running
    for worker in (a, b):
        worker.merge_window(0)  # the turns of the messages that join start at once
    await b.handle(_message(3, BOB, addressed=False))  # Bob goes on, on the other worker
    await b.handle(_message(4, CAROL, addressed=True))  # and Carol addresses the bot there

    session = await a.store.find_session(SessionKey(chat_id=GROUP))
    assert session is not None
    path = await a.store.load_path(session.id)
    # nothing of Bob's or Carol's is in the conversation while Alice's turn runs
    assert [r.message_ids[0] for r in path if isinstance(r.body, UserRecord)] == [1]

    model.gate.set()
    for worker in (a, b):  # B's messages join once A's did: A drains first
        await asyncio.wait_for(worker.app.inbound.drain(), deadline(EVENT))

    path = await a.store.load_path(session.id)
    members = [r.message_ids[0] for r in path if isinstance(r.body, UserRecord)]
    assert members == [1, 2, 3, 4]
    assert [r.id for r in path] == sorted(r.id for r in path)
    # Alice's turn answered before Bob's message joined, and each addressed message was
    # answered by a turn of its own (Bob's and Carol's: their workers, in order)
    kinds = ["user" if isinstance(r.body, UserRecord) else r.kind for r in path]
    assert kinds[:3] == ["user", "assistant", "user"]
    assert sum(isinstance(r.body, AssistantRecord) for r in path) == 3
    replied = [m.reply_to for w in (a, b) for m in w.messenger.sent]
    assert sorted(replied) == [1, 2, 4]
