"""`tgbot run --webhook` as real worker processes against the fake Bot API.

One worker on SQLite (always runs): updates are stored once, the turn still pending when
SIGTERM arrives is finished before the process exits. Two workers on one PostgreSQL (needs
TEST_POSTGRES_URL): updates posted like a load balancer would, including one update to both
workers at once, for several chats; nothing is lost or doubled, order is kept per chat,
turns of a chat never overlap and no message is answered twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.telegram.webhook import HEALTH_PATH
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from storage.engine import create_engine_for
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.probes import OverlapProbe, tag
from tests.test_scaleout.workers import SECRET, Worker, post, worker_env

pytestmark = pytest.mark.slow

PUBLIC_URL = "https://bot.example/webhook"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def message(api: FakeBotApi, update_id: int, chat: int, n: int, *, addressed: bool) -> Any:
    text = tag(chat, n)
    if chat < 0 and addressed:
        text = f"@{api.username} {text}"
    chat_type = "private" if chat > 0 else "supergroup"
    user = chat if chat > 0 else 7000 + n % 3
    return {"update_id": update_id, **api.user_message(chat, user, text, chat_type=chat_type)}


async def user_ids_on_path(store: SqlStore, chat: int) -> list[int | None]:
    session = await store.find_session(SessionKey(chat_id=chat))
    assert session is not None, chat
    path = await store.load_path(session.id)
    return [r.message_ids[0] for r in path if isinstance(r.body, UserRecord) and r.message_ids]


async def test_one_worker_on_sqlite_stores_once_and_drains_on_sigterm(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    async with FakeBotApi() as api:
        # a merge window long enough that the turn is still pending when SIGTERM arrives
        env = worker_env(api, tmp_path / "data", TRIGGERS__MERGE_WINDOW_SECONDS="1.0")
        worker = Worker("worker", env)
        try:
            await worker.start()
            async with http.get(worker.url + HEALTH_PATH) as response:
                assert response.status == 200
            updates = [message(api, n, 501, n, addressed=True) for n in (1, 2, 3)]
            for update in updates:
                assert await post(http, worker, update) == 200
            assert await post(http, worker, updates[1]) == 200  # a retry of a stored update
            assert await worker.stop() == 0, worker.output
        finally:
            await worker.kill()

    posted = [u["message"]["message_id"] for u in updates]
    replies = api.sent_messages(501)
    # one merged turn for the burst, answered to the last message, before the exit
    assert [r["reply_to_message"]["message_id"] for r in replies] == [posted[-1]]
    assert replies[0]["text"].startswith("Noted: ")
    store = SqlStore(
        create_engine_for(f"sqlite+aiosqlite:///{tmp_path / 'data' / 'tgbot.sqlite3'}")
    )
    try:
        assert await user_ids_on_path(store, 501) == posted
    finally:
        await store.close()


PRIVATE_CHATS = (601, 602, 603, 604)
GROUP = -100700
PER_CHAT = 6


@pytest.mark.postgres
async def test_two_workers_on_postgres_share_chats_without_loss_doubles_or_overlap(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    url = await fresh_postgres(migrate=False)  # the two workers migrate it, one at a time
    probe = OverlapProbe(think=0.02)
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeBotApi())
        llm = await stack.enter_async_context(FakeOpenAIServer(probe))
        workers = [
            Worker(
                f"worker-{n}",
                worker_env(
                    api,
                    tmp_path / f"data-{n}",
                    DATABASE_URL=url,
                    LLM_BASE_URL=llm.base_url,
                    WEBHOOK_URL=PUBLIC_URL,
                    TRIGGERS__MERGE_WINDOW_SECONDS="0",
                ),
            )
            for n in (1, 2)
        ]
        for worker in workers:
            stack.push_async_callback(worker.kill)
        await asyncio.gather(*(w.start() for w in workers))

        posted: dict[int, list[int]] = {}
        addressed: dict[int, list[int]] = {}
        update_ids = iter(range(1, 10_000))

        async def traffic(chat: int) -> None:
            for n in range(1, PER_CHAT + 1):
                wanted = chat > 0 or n % 2 == 1
                update = message(api, next(update_ids), chat, n, addressed=wanted)
                posted.setdefault(chat, []).append(update["message"]["message_id"])
                if wanted:
                    addressed.setdefault(chat, []).append(update["message"]["message_id"])
                # round robin per chat; every third update reaches both workers (a retry)
                targets = workers if n % 3 == 0 else [workers[(chat + n) % 2]]
                statuses = await asyncio.gather(*(post(http, w, update) for w in targets))
                assert set(statuses) == {200}

        await asyncio.gather(*(traffic(chat) for chat in (*PRIVATE_CHATS, GROUP)))
        codes = await asyncio.gather(*(w.stop() for w in workers))
        assert codes == [0, 0], "\n\n".join(w.output for w in workers)

    assert probe.overlaps == 0
    assert api.webhook_url == PUBLIC_URL
    assert [c["secret_token"] for c in api.calls_of("setWebhook")] == [SECRET, SECRET]
    store = SqlStore(create_engine_for(url))
    try:
        for chat, ids in posted.items():
            assert await user_ids_on_path(store, chat) == ids, chat
            replies = api.sent_messages(chat)
            answered = [r["reply_to_message"]["message_id"] for r in replies]
            assert len(answered) == len(set(answered)), (chat, answered)  # none answered twice
            assert set(answered) <= set(addressed[chat]), (chat, answered)
            assert addressed[chat][-1] in answered, (chat, answered)  # the last is answered
            assert all(r["text"].startswith("re ") for r in replies)
        assert probe.calls >= len(posted)
    finally:
        await store.close()
