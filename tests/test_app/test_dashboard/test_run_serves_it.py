"""`tgbot run` with DASHBOARD_PORT serves the dashboard, and its `/events` are live: a real
bot process, the fake Bot API, the fake OpenAI server, a member's message, one event."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess
from tests.test_reliability.conftest import BOT_TOKEN, suite_bot

pytestmark = pytest.mark.slow

MEMBER_ID = 5151
MEMBER: dict[str, object] = {"id": MEMBER_ID, "first_name": "Eve", "is_bot": False}
DASHBOARD_TOKEN = "dash-run-token-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[FakeBotApi, BotProcess, int]]:
    port = free_port()
    async with (
        FakeBotApi(BOT_TOKEN, username="test_bot", first_name="Helper") as api,
        FakeOpenAIServer(model=ScriptedModel([Reply("Hello from the model.")])) as llm,
    ):
        bot = suite_bot(api, llm, tmp_path)
        await bot.start(DASHBOARD_PORT=str(port), DASHBOARD_TOKEN=DASHBOARD_TOKEN)
        try:
            yield api, bot, port
        finally:
            await bot.stop()


async def test_the_running_bot_streams_its_model_calls(
    running: tuple[FakeBotApi, BotProcess, int],
) -> None:
    api, bot, port = running
    auth = {"Authorization": f"Bearer {DASHBOARD_TOKEN}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.get(f"http://127.0.0.1:{port}/healthz") as health:
            assert health.status == 200
        async with http.get(f"http://127.0.0.1:{port}/events") as stream:
            assert stream.status == 200
            await stream.content.readline()  # subscribed before the message arrives
            api.push_update(api.user_message(MEMBER_ID, MEMBER, "hi there", chat_type="private"))
            event = ""
            async with asyncio.timeout(30):
                while not event.startswith("event: model_call"):
                    event = (await stream.content.readline()).decode()
                data = json.loads((await stream.content.readline()).decode().removeprefix("data: "))
        assert data["chat"] == MEMBER_ID
        assert data["scene"] == "private"
        async with http.get(f"http://127.0.0.1:{port}/chats/{MEMBER_ID}") as page:
            assert page.status == 200
            assert "hi there" in await page.text()
    assert "dashboard on http://0.0.0.0:" in bot.log()
    assert DASHBOARD_TOKEN not in bot.log()
