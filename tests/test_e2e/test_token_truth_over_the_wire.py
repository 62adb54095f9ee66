"""Token corrections through `tgbot run`: a busy bot writes its book at most every few
seconds, and what it learned since is on disk once it stops (SIGTERM), not lost. The same
run settles its heap before the first update (`bot.app.heap`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.token_corrections_file import FILE_NAME
from tests.bot_process import StartBot, reply_stored

pytestmark = pytest.mark.slow

CHAT = 1001  # a private chat: Alice's own id
ALICE = {"id": CHAT, "first_name": "Alice"}


def learned_samples(data_dir: Path) -> int:
    book = json.loads((data_dir / FILE_NAME).read_text(encoding="utf-8"))
    (route,) = book["routes"].values()
    return int(route["samples"])


async def test_what_the_bot_learned_is_saved_when_it_stops(
    bot_running: StartBot, tmp_path: Path
) -> None:
    api, llm, bot, store = await bot_running(ScriptedModel(), BOT_LOCALE="en")
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
