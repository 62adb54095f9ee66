"""A `getUpdates` batch through the real poller into SQLite, stored with one transaction per
round: each chat's messages in order around a command (handled alone, in its place), every
message that asks for an answer answered once, and a redelivered batch stored once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from tests.test_reliability.conftest import LiveBot

GROUP = -100910
OTHER = -100911
ALICE: dict[str, Any] = {"id": 1101, "first_name": "Alice"}
BOB: dict[str, Any] = {"id": 1102, "first_name": "Bob"}


@pytest.fixture
async def sql_live(api: FakeBotApi, tmp_path: Path) -> AsyncIterator[LiveBot]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}"
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url))
    bot = LiveBot(api, store, tmp_path)
    await bot.start()
    try:
        yield bot
    finally:
        await bot.close()
        await store.close()


async def user_texts(live: LiveBot, chat_id: int) -> list[str]:
    session = await live.store.find_session(SessionKey(chat_id=chat_id))
    if session is None:
        return []
    path = await live.store.load_path(session.id)
    return [r.body.text for r in path if isinstance(r.body, UserRecord)]


def replied_to(api: FakeBotApi, chat_id: int) -> list[str]:
    return [m["reply_to_message"]["text"] for m in api.sent_messages(chat_id)]


async def test_one_batch_keeps_each_chat_in_order_around_a_command_and_answers_once(
    sql_live: LiveBot, api: FakeBotApi
) -> None:
    texts = ["good morning", "@test_bot what is on today?", "/nosuchcommand", "thanks"]
    senders = [ALICE, BOB, ALICE, BOB]
    for text, sender in zip(texts, senders, strict=True):
        api.push_update(api.user_message(GROUP, sender, text))
        api.push_update(api.user_message(OTHER, sender, f"elsewhere: {text}"))
    last = api.push_update(api.user_message(GROUP, ALICE, "and one more"))
    await sql_live.handled(last)

    assert await user_texts(sql_live, GROUP) == [*texts, "and one more"]
    assert await user_texts(sql_live, OTHER) == [f"elsewhere: {t}" for t in texts]
    # a mention and a command (not ours, so stored) are answered, once each, in order
    assert replied_to(api, GROUP) == ["@test_bot what is on today?", "/nosuchcommand"]
    assert replied_to(api, OTHER) == ["elsewhere: @test_bot what is on today?"]

    # the same batch again (a restart before the offset was confirmed): nothing doubles
    for text, sender in zip(texts, senders, strict=True):
        message_id = texts.index(text) + 1
        again = api.user_message(GROUP, sender, text, message_id=message_id)
        last = api.push_update(again)
    await sql_live.handled(last)
    assert await user_texts(sql_live, GROUP) == [*texts, "and one more"]
    assert len(api.sent_messages(GROUP)) == 2
