"""Finding 28.9: a model that sends one byte a second kept a turn alive for ever (the read
timeout restarts with every byte) and SIGTERM then needed SIGKILL after 30 s. A real
`tgbot run` against a trickling model: the call deadline (`[runtime]
model_call_deadline_seconds`) ends the turn with the usual failure notice, and SIGTERM
during such a call exits promptly (`shutdown_grace_seconds`, then in-flight turns are
cancelled)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web

from bot.texts import text
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess
from tests.deadlines import EVENT, deadline
from tests.test_reliability.conftest import BOT_TOKEN, SETTINGS

pytestmark = pytest.mark.slow

MEMBER: dict[str, object] = {"id": 7171, "first_name": "Tia", "is_bot": False}


class TricklingModel:
    """`/v1/chat/completions` answers 200 and then one byte of a JSON body a second,
    never finishing; `called` is set when the first request arrives."""

    def __init__(self) -> None:
        self.called = asyncio.Event()
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.called.set()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        while True:
            await response.write(b" ")
            await asyncio.sleep(1)

    async def __aenter__(self) -> TricklingModel:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[FakeBotApi, TricklingModel, Path]]:
    async with (
        FakeBotApi(BOT_TOKEN, username="test_bot", first_name="Helper") as api,
        TricklingModel() as model,
    ):
        yield api, model, tmp_path


def _bot(api: FakeBotApi, model: TricklingModel, data: Path, **extra: str) -> BotProcess:
    settings: dict[str, Any] = {**SETTINGS, **extra}
    return BotProcess(api, cast(FakeOpenAIServer, model), data, **settings)


async def test_the_call_deadline_ends_a_trickling_call(
    world: tuple[FakeBotApi, TricklingModel, Path],
) -> None:
    api, model, data = world
    bot = _bot(api, model, data, RUNTIME__MODEL_CALL_DEADLINE_SECONDS="3")
    await bot.start()
    try:
        api.push_update(api.user_message(7171, MEMBER, "hello?", chat_type="private"))
        await api.wait_for_call("sendMessage", 1, timeout=deadline(EVENT))
        assert api.sent_messages(7171)[0]["text"] == text("en", "provider")
    finally:
        await bot.stop()


async def test_sigterm_during_a_trickling_call_exits_promptly(
    world: tuple[FakeBotApi, TricklingModel, Path],
) -> None:
    api, model, data = world
    bot = _bot(api, model, data, RUNTIME__SHUTDOWN_GRACE_SECONDS="2")
    await bot.start()
    api.push_update(api.user_message(7171, MEMBER, "hello?", chat_type="private"))
    await asyncio.wait_for(model.called.wait(), deadline(EVENT))
    started = time.monotonic()
    code = await bot.stop()  # SIGTERM; SIGKILL only after 30 s
    assert code == 0
    assert time.monotonic() - started < 20
    assert "cancelling them" in bot.log()
