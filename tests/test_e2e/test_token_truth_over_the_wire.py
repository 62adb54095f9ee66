"""Token corrections through `tgbot run`: a busy bot writes its book at most every few
seconds, and what it learned since is on disk once it stops (SIGTERM), not lost. The same
run settles its heap before the first update (`bot.app.heap`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.llm.fake_server import FakeOpenAIServer
from adapters.llm.scripted import ScriptedModel
from adapters.telegram.fake_api import FakeBotApi
from bot.agent.token_truth import FILE_NAME
from tests.bot_process import bot_running, reply_stored, sqlite_store

pytestmark = pytest.mark.slow

CHAT = 1001  # a private chat: Alice's own id
ALICE = {"id": CHAT, "first_name": "Alice"}
CONFIG = """\
[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0
"""


def learned_samples(data_dir: Path) -> int:
    book = json.loads((data_dir / FILE_NAME).read_text(encoding="utf-8"))
    (route,) = book["routes"].values()
    return int(route["samples"])


async def test_what_the_bot_learned_is_saved_when_it_stops(tmp_path: Path) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(CONFIG, encoding="utf-8")
    async with (
        FakeBotApi(username="test_bot") as api,
        FakeOpenAIServer(ScriptedModel()) as llm,
        sqlite_store(tmp_path) as store,
    ):
        async with bot_running(
            api,
            llm,
            tmp_path,
            LLM_API_KEY="sk-test",
            LLM_MODEL="fake-model",
            BOT_LOCALE="en",
            BOT_CONFIG=str(config),
        ) as bot:
            for n in range(6):
                api.push_update(api.user_message(CHAT, ALICE, f"question {n}", chat_type="private"))
                await reply_stored(api, store, CHAT, n + 1)
            # the first call's correction was written at once; the bot is still learning
            assert 1 <= learned_samples(tmp_path) <= 6
            assert await bot.stop() == 0, bot.log()
            assert "start-up objects frozen out of garbage collection" in bot.log()
        calls = len(llm.requests)
        assert calls == 6
        assert learned_samples(tmp_path) == calls, "every call's lesson is on disk after a stop"
