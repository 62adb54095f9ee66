"""From finding 28.11: data files are created 0600 by `tgbot run` (the database, the
ledger, the token corrections), and unauthenticated webhook requests do not log a line
each (anyone can send them)."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import aiohttp
import pytest
from aiogram import Dispatcher

from adapters.llm.scripted import Reply, ScriptedModel
from adapters.telegram.bot_session import build_bot
from adapters.telegram.webhook import SECRET_HEADER, WEBHOOK_PATH, WebhookServer
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import eventually
from tests.deadlines import EVENT, deadline
from tests.test_reliability.conftest import BOT_TOKEN, suite_bot

MEMBER: dict[str, object] = {"id": 8181, "first_name": "Ida", "is_bot": False}


@pytest.mark.slow
async def test_tgbot_run_creates_its_data_files_private(tmp_path: Path) -> None:
    async with (
        FakeBotApi(BOT_TOKEN, username="test_bot", first_name="Helper") as api,
        FakeOpenAIServer(model=ScriptedModel([Reply("Hi.")])) as llm,
    ):
        bot = suite_bot(api, llm, tmp_path)
        await bot.start()
        try:
            api.push_update(api.user_message(8181, MEMBER, "hello", chat_type="private"))
            await api.wait_for_call("sendMessage", 1, timeout=deadline(EVENT))

            traces = tmp_path / "agent-traces"

            async def ledger_written() -> bool:
                return any(traces.glob("*.jsonl"))

            await eventually(ledger_written)
        finally:
            assert await bot.stop() == 0
    _assert_private(tmp_path)


def _assert_private(data: Path) -> None:
    files = [
        data / "tgbot.sqlite3",
        *(data / "agent-traces").glob("*.jsonl"),
        *data.glob("token-corrections.json"),
    ]
    assert len(files) >= 2
    for path in files:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path.name, oct(mode))


async def test_wrong_secret_requests_are_logged_a_few_times_not_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bot = build_bot("1:offline", "http://127.0.0.1:9")  # never contacted
    server = WebhookServer(Dispatcher(), bot, secret="right-secret", port=0)
    await server.start()
    caplog.set_level(logging.WARNING, logger="adapters.telegram.webhook")
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{server.port}{WEBHOOK_PATH}"
            for _ in range(200):
                async with http.post(url, json={}, headers={SECRET_HEADER: "wrong"}) as r:
                    assert r.status == 401
    finally:
        await server.stop()
        await bot.session.close()
    lines = [r for r in caplog.records if "wrong secret" in r.getMessage()]
    assert 1 <= len(lines) <= 3
