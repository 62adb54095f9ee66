"""The webhook server in one process on SQLite: real HTTP in, the fake Bot API out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiogram import Bot

from adapters.llm.scripted import ScriptedModel
from adapters.telegram import polling_loop
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.sender import TelegramMessenger
from adapters.telegram.webhook import (
    HEALTH_PATH,
    SECRET_HEADER,
    WebhookServer,
    register_webhook,
)
from bot.app.wiring import App
from bot.config import load_settings
from bot.domain.facts import InboundMessage
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.errors import StorageUnavailable
from bot.services.turn_scheduler import LocalChatLock
from storage.engine import create_engine_for
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from tests.rig import wire_app

SECRET = "s3cret-token_1"
USER = 1001


@dataclass
class Rig:
    api: FakeBotApi
    bot: Bot
    app: App
    store: SqlStore
    server: WebhookServer
    http: aiohttp.ClientSession

    async def post(self, update: dict[str, Any], *, secret: str | None = SECRET) -> int:
        headers = {SECRET_HEADER: secret} if secret is not None else {}
        async with self.http.post(self.server.url, json=update, headers=headers) as response:
            return response.status


@pytest.fixture
async def rig(tmp_path: Path, sqlite_url: str) -> AsyncIterator[Rig]:
    settings = load_settings(
        data_dir=tmp_path,
        database_url=sqlite_url,
        bot_locale="en",
        triggers={"merge_window_seconds": 0},
    )
    store = SqlStore(create_engine_for(sqlite_url))
    async with FakeBotApi() as api, aiohttp.ClientSession() as http:
        bot = build_bot(api.token, api.base_url)
        app = wire_app(
            settings,
            store=store,
            messenger=TelegramMessenger(bot),
            model=ScriptedModel(),
            chat_lock=LocalChatLock(),
            bot_id=api.bot_id,
            bot_name=api.first_name,
        )
        dispatcher = build_dispatcher(
            app.inbound, bot_id=api.bot_id, bot_username=api.username, locale="en"
        )
        server = WebhookServer(dispatcher, bot, secret=SECRET, port=0)
        await server.start()
        try:
            yield Rig(api, bot, app, store, server, http)
        finally:
            await server.stop()
            await app.inbound.drain()
            await app.routes.aclose()
            await bot.session.close()
            await store.close()


def private(api: FakeBotApi, update_id: int, text: str) -> dict[str, Any]:
    return {"update_id": update_id, **api.user_message(USER, USER, text, chat_type="private")}


async def test_an_update_and_its_retry_are_stored_once_and_answered_once(rig: Rig) -> None:
    update = private(rig.api, 1, "hello over the webhook")
    statuses = await asyncio.gather(rig.post(update), rig.post(update))
    assert list(statuses) == [200, 200]
    await rig.app.inbound.drain()

    replies = rig.api.sent_messages(USER)
    assert [r["reply_to_message"]["message_id"] for r in replies] == [1]
    assert replies[0]["text"] == "Noted: hello over the webhook"
    session = await rig.store.find_session(SessionKey(chat_id=USER))
    assert session is not None
    path = await rig.store.load_path(session.id)
    assert [r.kind for r in path] == ["user", "assistant"]


async def test_an_edit_that_comes_before_its_message_is_stored_and_answered(rig: Rig) -> None:
    """Workers take updates in parallel: the edit may be handled first. It is stored as the
    message, with its newest text, and answered; the original is then a duplicate."""
    original = private(rig.api, 1, "helo")
    message_id = original["message"]["message_id"]
    edit = {
        "update_id": 2,
        **rig.api.user_message(
            USER, USER, "hello", chat_type="private", message_id=message_id, edit=True
        ),
    }
    assert await rig.post(edit) == 200
    assert await rig.post(original) == 200
    await rig.app.inbound.drain()
    replies = rig.api.sent_messages(USER)
    assert [r["text"] for r in replies] == ["Noted: hello"]
    stored = await rig.store.find_platform_message(USER, message_id)
    assert stored is not None
    assert stored.text == "hello"


async def test_messages_keep_their_order_and_each_is_answered(rig: Rig) -> None:
    posted: list[int] = []
    for n in range(1, 5):
        update = private(rig.api, n, f"message {n}")
        posted.append(update["message"]["message_id"])
        assert await rig.post(update) == 200
        await rig.app.inbound.drain()
    session = await rig.store.find_session(SessionKey(chat_id=USER))
    assert session is not None
    path = await rig.store.load_path(session.id)
    users = [r.message_ids[0] for r in path if isinstance(r.body, UserRecord)]
    assert users == posted
    replies = rig.api.sent_messages(USER)
    assert [r["reply_to_message"]["message_id"] for r in replies] == posted


@pytest.mark.parametrize("secret", [None, "wrong", ""], ids=["missing", "wrong", "empty"])
async def test_a_request_without_the_secret_is_refused(rig: Rig, secret: str | None) -> None:
    assert await rig.post(private(rig.api, 1, "let me in"), secret=secret) == 401
    assert await rig.store.find_session(SessionKey(chat_id=USER)) is None


async def test_a_wrong_secret_is_refused_before_any_body_is_read(rig: Rig) -> None:
    """A wrong secret with a body that trickles (here: never comes) is answered 401 from its
    headers at once; reading the body first answered 408 only at the body deadline."""
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.server.port)
    try:
        writer.write(
            b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"{SECRET_HEADER}: wrong\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        )
        await writer.drain()
        status = await reader.readline()
        assert status.startswith(b"HTTP/1.1 401"), status
        headers = (await reader.readuntil(b"\r\n\r\n")).lower()
        assert b"connection: close" in headers
    finally:
        writer.close()


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]"], ids=["text", "list"])
async def test_a_body_that_is_not_json_object_is_refused(rig: Rig, body: bytes) -> None:
    headers = {SECRET_HEADER: SECRET, "Content-Type": "application/json"}
    async with rig.http.post(rig.server.url, data=body, headers=headers) as response:
        assert response.status == 400


async def test_an_update_that_does_not_validate_is_accepted_and_the_next_is_answered(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    poisoned = private(rig.api, 1, "a sticker in an old shape")
    del poisoned["message"]["text"]
    poisoned["message"]["sticker"] = {"file_id": "old-sticker"}  # no unique id, no type
    chat = poisoned["message"]["chat"]  # and a chat nothing reads: not even leniently
    poisoned["message"]["chat"] = {key: value for key, value in chat.items() if key != "type"}
    # Telegram would send a 4xx/5xx answer again and again, holding up the chat
    assert await rig.post(poisoned) == 200
    assert "skipping update 1 that does not validate: message.chat" in caplog.text
    assert await rig.post(private(rig.api, 2, "still there?")) == 200
    await rig.app.inbound.drain()
    assert [m["text"] for m in rig.api.sent_messages(USER)] == ["Noted: still there?"]


async def test_the_health_endpoint_answers(rig: Rig) -> None:
    url = f"http://127.0.0.1:{rig.server.port}{HEALTH_PATH}"
    async with rig.http.get(url) as response:
        assert response.status == 200
        assert await response.json() == {"ok": True}


async def test_register_webhook_sends_url_secret_and_used_update_kinds(rig: Rig) -> None:
    dispatcher = build_dispatcher(
        rig.app.inbound, bot_id=rig.api.bot_id, bot_username=rig.api.username, locale="en"
    )
    await register_webhook(rig.bot, dispatcher, url="https://bot.example/webhook", secret=SECRET)
    assert rig.api.webhook_url == "https://bot.example/webhook"
    (call,) = rig.api.calls_of("setWebhook")
    assert call["secret_token"] == SECRET
    assert {"message", "edited_message"} <= set(call["allowed_updates"])


class _BlockingSink:
    """An InboundSink that holds every message until released."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.done: list[int] = []

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        self.entered.set()
        await self.release.wait()
        self.done += [message.message_id for message in messages]

    async def on_edit(self, message: InboundMessage) -> None:
        return None


async def test_stopping_finishes_the_request_in_flight() -> None:
    sink = _BlockingSink()
    async with FakeBotApi() as api, aiohttp.ClientSession() as http:
        bot = build_bot(api.token, api.base_url)
        dispatcher = build_dispatcher(sink, bot_id=api.bot_id, bot_username=None, locale="en")
        server = WebhookServer(dispatcher, bot, secret=None, port=0)
        await server.start()
        try:
            update = private(api, 1, "slow one")
            posting = asyncio.create_task(http.post(server.url, json=update))
            await sink.entered.wait()
            stopping = asyncio.create_task(server.stop())
            sink.release.set()
            async with await posting as response:
                assert response.status == 200
            await stopping
        finally:
            await server.stop()
            await bot.session.close()
    assert sink.done == [1]


class _OutageSink:
    """An InboundSink whose database is away for the first `failures` deliveries."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.stored: list[int] = []

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StorageUnavailable("database is locked")
        self.stored += [message.message_id for message in messages]

    async def on_edit(self, message: InboundMessage) -> None:
        return None


async def test_a_database_outage_is_retried_then_answered_500_and_the_update_comes_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A webhook update takes the poller's path: a transient error is retried in place, and
    when it persists the answer is 500, so Telegram sends the update again; nothing is lost."""
    monkeypatch.setattr(polling_loop, "STORAGE_RETRY_DELAY", 0.01)
    monkeypatch.setattr(polling_loop, "STORAGE_RETRIES", 1)  # two attempts per request
    sink = _OutageSink(failures=3)
    async with FakeBotApi() as api, aiohttp.ClientSession() as http:
        bot = build_bot(api.token, api.base_url)
        dispatcher = build_dispatcher(sink, bot_id=api.bot_id, bot_username=None, locale="en")
        server = WebhookServer(dispatcher, bot, secret=None, port=0)
        await server.start()
        try:
            update = private(api, 1, "are you there?")
            async with http.post(server.url, json=update) as response:
                assert response.status == 500
            assert sink.stored == []
            async with http.post(server.url, json=update) as response:  # Telegram again
                assert response.status == 200
        finally:
            await server.stop()
            await bot.session.close()
    assert sink.stored == [update["message"]["message_id"]]
