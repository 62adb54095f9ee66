"""A real `tgbot run` process against the fake Bot API and the fake OpenAI server.

`bot` is a `BotProcess` (tests/bot_process.py) with this suite's settings: owner 4242,
English, no merge window, no daily summary, no retries, DEBUG logs. `GatedModel` is a
scripted model whose calls can be held at a gate, so a test knows a turn is inside its
model call (an event, not a sleep).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.scripted import ScriptedModel
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from bot.domain.ids import SessionKey
from bot.domain.records import StoredRecord
from bot.ports import LLMRequest, LLMResponse, TextSink
from bot.store_ports import ConversationStore
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess, sqlite_store
from tests.deadlines import EVENT, deadline
from tests.rig import rig_settings, wire_app

BOT_TOKEN = "424242:SECRET-bot-token-do-not-log"
LLM_KEY = "sk-SECRET-llm-key-do-not-log"
OWNER = 4242
SETTINGS = {
    "LLM_API_KEY": LLM_KEY,
    "OWNER_ID": str(OWNER),
    "BOT_LOCALE": "en",
    "TRIGGERS__MERGE_WINDOW_SECONDS": "0",
    "SCHEDULE__DAILY_SUMMARY": "false",
    "RUNTIME__MAX_RETRIES": "0",
    "TGBOT_LOG_LEVEL": "DEBUG",
}


def suite_bot(api: FakeBotApi, llm: FakeOpenAIServer, data_dir: Path) -> BotProcess:
    """A `BotProcess` with this suite's `SETTINGS` (not started)."""
    return BotProcess(api, llm, data_dir, **SETTINGS)


class GatedModel:
    """An `LLMProvider` that answers with `respond(request)`. A call for which `hold(request)`
    is true waits at `gate` while it is closed; `held` is set when such a call arrives."""

    def __init__(
        self,
        respond: Callable[[LLMRequest], LLMResponse],
        hold: Callable[[LLMRequest], bool] = lambda _request: False,
    ) -> None:
        self.respond = respond
        self.hold = hold
        self.gate = asyncio.Event()
        self.held = asyncio.Event()
        self.requests: list[LLMRequest] = []

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        self.requests.append(request)
        if self.hold(request):
            self.held.set()
            await self.gate.wait()
        return self.respond(request)


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(BOT_TOKEN, username="test_bot", first_name="Helper") as server:
        yield server


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    """The model is set by each test (`llm.model = GatedModel(...)`)."""
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def bot(api: FakeBotApi, llm: FakeOpenAIServer, tmp_path: Path) -> AsyncIterator[BotProcess]:
    process = suite_bot(api, llm, tmp_path)
    try:
        yield process
    finally:
        if process.process is not None and process.process.poll() is None:
            process.kill()


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqlStore]:
    """The bot's SQLite file, read from the test process while the bot runs."""
    async with sqlite_store(tmp_path) as store:
        yield store


async def path_of(db: SqlStore, chat_id: int) -> tuple[StoredRecord, ...]:
    session = await db.find_session(SessionKey(chat_id=chat_id))
    if session is None:
        return ()
    return await db.load_path(session.id)


def orphaned_tool_calls(body: dict[str, Any]) -> list[str]:
    """Tool call ids in a chat-completions request body without a tool message answering
    them, and tool messages answering no call."""
    calls: list[str] = []
    answered: list[str] = []
    for message in body.get("messages", []):
        for call in message.get("tool_calls") or []:
            calls.append(call["id"])
        if message.get("role") == "tool":
            answered.append(message.get("tool_call_id"))
    return sorted(set(calls).symmetric_difference(answered))


class LiveBot:
    """The app in this process, polling the fake Bot API through aiogram's real client
    (`poll_updates`), with a scripted model; the store is given (in-memory or SQL)."""

    def __init__(self, api: FakeBotApi, store: ConversationStore, data_dir: Path) -> None:
        self.api = api
        self.store = store
        self.data_dir = data_dir
        self.model = ScriptedModel()
        self.slept: list[float] = []
        self.stop_polling = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.bot = build_bot(api.token, api.base_url)

        async def no_wait(seconds: float) -> None:
            self.slept.append(seconds)

        self.messenger = TelegramMessenger(self.bot, sleep=no_wait)
        self.app = wire_app(
            rig_settings(data_dir, owner_id=OWNER),
            store=store,
            messenger=self.messenger,
            model=self.model,
            bot_id=api.bot_id,
            bot_name=api.first_name,
        )
        self.dispatcher = build_dispatcher(
            self.app.inbound, bot_id=api.bot_id, bot_username=api.username, locale="en"
        )

    async def start(self) -> None:
        polls = len(self.api.calls_of("getUpdates"))
        self._task = asyncio.create_task(
            poll_updates(self.dispatcher, self.bot, stop=self.stop_polling, poll_seconds=5)
        )
        await self.api.wait_for_call("getUpdates", polls + 1)

    async def handled(self, last_update_id: int) -> None:
        """Wait until every update up to `last_update_id` was handled and its turns ended."""
        await wait_confirmed(self.api, last_update_id)
        await self.app.inbound.drain()

    async def close(self) -> None:
        self.stop_polling.set()
        if self._task is not None:
            await self._task
        await self.app.inbound.drain()
        await self.bot.session.close()


async def wait_confirmed(api: FakeBotApi, last_update_id: int) -> None:
    """Wait until the bot asked for updates after `last_update_id`: everything up to it was
    handled (the poller confirms a batch only after handling it)."""

    async def confirmed() -> bool:
        return any(
            int(call.get("offset") or 0) > last_update_id for call in api.calls_of("getUpdates")
        )

    while not await confirmed():
        calls = len(api.calls_of("getUpdates"))
        await api.wait_for_call("getUpdates", calls + 1, timeout=deadline(EVENT))


@pytest.fixture
async def live(api: FakeBotApi, tmp_path: Path) -> AsyncIterator[LiveBot]:
    from testkit.memory_store import InMemoryStore

    bot = LiveBot(api, InMemoryStore(), tmp_path)
    await bot.start()
    yield bot
    await bot.close()
