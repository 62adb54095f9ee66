"""The fake Bot API on 127.0.0.1 (as `@test_bot`) and an aiogram client talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiogram import Bot

from adapters.telegram.bot_session import build_bot
from testkit.fake_bot_api import FakeBotApi


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(username="test_bot") as server:
        yield server


@pytest.fixture
async def bot(api: FakeBotApi) -> AsyncIterator[Bot]:
    client = build_bot(api.token, api.base_url)
    yield client
    await client.session.close()
