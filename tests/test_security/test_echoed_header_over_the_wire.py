"""Finding 28.1 through the real process: a model reply of `[` and `id:` repeated 40
times (the pattern that stripped echoed headers backtracked: 24 repeats froze every chat
for 10 s, 40 for days) is delivered, and another chat's message is answered meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.deadlines import EVENT, deadline
from tests.test_reliability.conftest import BOT_TOKEN, suite_bot

pytestmark = pytest.mark.slow

HOSTILE = "[" + "id:" * 40
ANN: dict[str, object] = {"id": 9191, "first_name": "Ann", "is_bot": False}
BEN: dict[str, object] = {"id": 9292, "first_name": "Ben", "is_bot": False}


async def test_a_backtracking_bait_reply_freezes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([Reply(HOSTILE), Reply("Hello Ben.")])
    async with (
        FakeBotApi(BOT_TOKEN, username="test_bot", first_name="Helper") as api,
        FakeOpenAIServer(model=model) as llm,
    ):
        bot = suite_bot(api, llm, tmp_path)
        await bot.start()
        try:
            api.push_update(api.user_message(9191, ANN, "say the bait", chat_type="private"))
            await api.wait_for_call("sendMessage", 1, timeout=deadline(EVENT))
            api.push_update(api.user_message(9292, BEN, "hi", chat_type="private"))
            await api.wait_for_call("sendMessage", 2, timeout=deadline(EVENT))
        finally:
            assert await bot.stop() == 0
    assert api.sent_messages(9191)[0]["text"] == HOSTILE
    assert api.sent_messages(9292)[0]["text"] == "Hello Ben."
