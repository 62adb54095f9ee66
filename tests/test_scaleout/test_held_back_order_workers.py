"""Two real `tgbot run --webhook` workers on one PostgreSQL store a chat's messages in
Telegram's order (issue 51, item 9), in the race the issue names.

Alice addresses the bot on worker A; Bob addresses it there too while Alice's turn waits out
its merge window (an hour here: no machine is too slow for it), so Bob's message is held back
and Alice's turn starts at once; the model holds that turn. Meanwhile Bob's next message and
Carol's reach worker B. Before, B stored them at once, ahead of Bob's held-back message; now
B holds them back too, and all four are stored in Telegram's order once Alice's turn
answered. The workers answer every update at once all along (the webhook never waits on a
turn).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord, UserRecord
from bot.ports import LLMRequest, LLMResponse, TextSink
from storage.engine import create_engine_for
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import eventually
from tests.deadlines import EVENT, deadline
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.workers import Worker, post, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

GROUP = -100661
ALICE = {"id": 601, "is_bot": False, "first_name": "Alice"}
BOB = {"id": 602, "is_bot": False, "first_name": "Bob"}
CAROL = {"id": 603, "is_bot": False, "first_name": "Carol"}


class HeldModel:
    """Answers "ok"; the first call waits until `release` is set."""

    def __init__(self) -> None:
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        if not self.holding.is_set():
            self.holding.set()
            await self.release.wait()
        return LLMResponse(text="ok")


@dataclass
class Rig:
    api: FakeBotApi
    model: HeldModel
    a: Worker
    b: Worker
    http: aiohttp.ClientSession
    store: SqlStore
    next_update: int = 1

    async def say(self, worker: Worker, user: dict[str, Any], words: str) -> int:
        """A group message to `worker`, as Telegram posts it; returns its message id."""
        update = {
            "update_id": self.next_update,
            **self.api.user_message(GROUP, user, words, chat_type="supergroup"),
        }
        self.next_update += 1
        assert await post(self.http, worker, update) == 200
        return int(update["message"]["message_id"])

    async def stored(self) -> list[tuple[str, int | None]]:
        """The conversation's records on its active path: (kind, first message id)."""
        session = await self.store.find_session(SessionKey(chat_id=GROUP))
        if session is None:
            return []
        path = await self.store.load_path(session.id)
        return [
            ("user" if isinstance(r.body, UserRecord) else r.kind, r.message_ids[0])
            for r in path
            if isinstance(r.body, UserRecord | AssistantRecord)
        ]


@pytest_asyncio.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    url = await fresh_postgres(migrate=False)  # the workers migrate it, one at a time
    model = HeldModel()
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeBotApi(username="order_bot"))
        llm = await stack.enter_async_context(FakeOpenAIServer(model))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        workers = [
            Worker(
                name,
                worker_env(
                    api,
                    tmp_path / name,
                    DATABASE_URL=url,
                    LLM_BASE_URL=llm.base_url,
                    LLM_API_KEY="sk-test",
                    LLM_MODEL="fake-model",
                    TRIGGERS__MERGE_WINDOW_SECONDS="3600",
                ),
            )
            for name in ("A", "B")
        ]
        for worker in workers:
            stack.push_async_callback(worker.kill)  # turns still in their window: no drain
        stack.callback(model.release.set)
        await workers[0].start()  # migrates
        await workers[1].start()
        store = SqlStore(create_engine_for(url))
        stack.push_async_callback(store.close)
        yield Rig(api, model, workers[0], workers[1], http, store)


async def test_a_message_held_back_on_one_worker_is_stored_before_later_ones_on_the_other(
    rig: Rig,
) -> None:
    first = await rig.say(rig.a, ALICE, "@order_bot what is on today?")
    held = await rig.say(rig.a, BOB, "@order_bot and tomorrow?")  # waits behind Alice's turn
    await asyncio.wait_for(rig.model.holding.wait(), deadline(EVENT))  # Alice's turn runs
    later = await rig.say(rig.b, BOB, "I mean the weather")
    latest = await rig.say(rig.b, CAROL, "@order_bot and for me?")
    assert first < held < later < latest

    # B answered both updates without waiting on the turn, and stored neither yet
    assert await rig.stored() == [("user", first)]

    rig.model.release.set()

    async def all_stored() -> bool:
        return sum(kind == "user" for kind, _ in await rig.stored()) == 4

    await eventually(all_stored)
    assert await rig.stored() == [
        ("user", first),
        ("assistant", rig.api.sent_messages(GROUP)[0]["message_id"]),
        ("user", held),
        ("user", later),
        ("user", latest),
    ]
