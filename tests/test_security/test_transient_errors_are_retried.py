"""Finding 28.3: a transient `OSError` while an update is parsed or stored (out of file
handles) must leave it unconfirmed, so `getUpdates` delivers it again and the member's
mention is answered once the process recovers; only an update that fails validation is
skipped. Through the real poller against the fake Bot API."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiogram import Bot

from adapters.telegram import polling_loop
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import poll_updates
from bot.domain.facts import InboundMessage
from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline

CHAT = -100_500
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}


@pytest.fixture(autouse=True)
def quick_storage_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retries' waits shrunk (the same doubling, from 10 ms): what is retried is the point.
    So is the wait before an unconfirmed batch is fetched again."""
    monkeypatch.setattr(polling_loop, "STORAGE_RETRY_DELAY", 0.01)
    monkeypatch.setattr(polling_loop, "FIRST_BACKOFF", 0.01)


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(username="test_bot") as server:
        yield server


@pytest.fixture
async def bot(api: FakeBotApi) -> AsyncIterator[Bot]:
    client = build_bot(api.token, api.base_url)
    yield client
    await client.session.close()


class Sink:
    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.stored: list[str] = []
        self.changed = asyncio.Event()

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        self.stored += [message.text or "" for message in messages]
        self.changed.set()

    async def on_edit(self, message: InboundMessage) -> None:
        raise AssertionError("no edits here")


async def _poll_until(api: FakeBotApi, bot: Bot, sink: Sink, texts: list[str]) -> None:
    dispatcher = build_dispatcher(sink, bot_id=api.bot_id, bot_username="test_bot", locale="en")
    stop = asyncio.Event()
    polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop, poll_seconds=1))
    try:
        async with asyncio.timeout(deadline(EVENT)):
            while sink.stored != texts:
                sink.changed.clear()
                await sink.changed.wait()
    finally:
        stop.set()
        await polling


async def test_an_os_error_while_storing_is_retried_until_it_is_stored(
    api: FakeBotApi, bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(polling_loop, "STORAGE_RETRIES", 1)  # give up fast, stay unconfirmed
    sink = Sink(failures=3)  # more than one poll's retries (two with STORAGE_RETRIES = 1)
    api.push_update(api.user_message(CHAT, ALICE, "@test_bot are you there?"))
    await _poll_until(api, bot, sink, ["@test_bot are you there?"])


async def test_an_os_error_while_parsing_is_not_a_skip(
    api: FakeBotApi, bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(polling_loop, "STORAGE_RETRIES", 1)
    real = polling_loop.parse_update_strict
    failures = [3]

    def flaky(*args: Any, **kwargs: Any) -> InboundMessage | None:
        if failures[0] > 0:
            failures[0] -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return real(*args, **kwargs)

    monkeypatch.setattr(polling_loop, "parse_update_strict", flaky)
    sink = Sink()
    api.push_update(api.user_message(CHAT, ALICE, "first"))
    api.push_update(api.user_message(CHAT, ALICE, "second"))
    await _poll_until(api, bot, sink, ["first", "second"])


async def test_an_update_that_fails_validation_is_still_skipped(api: FakeBotApi, bot: Bot) -> None:
    sink = Sink()
    api.push_update({"message": {"message_id": "not a number", "chat": 5}})
    api.push_update(api.user_message(CHAT, ALICE, "after the bad one"))
    await _poll_until(api, bot, sink, ["after the bad one"])
