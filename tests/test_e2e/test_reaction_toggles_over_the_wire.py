"""One member toggling 👍 on the bot's reply, through `tgbot run`: a thousand toggles leave
one stored row for that member, message and emoji (they were 500 rows, and as many lines
offered to the next turn's `[Reactions since your last reply]`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.ports import LLMResponse
from tests.bot_process import StartBot, eventually, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1005550404
ALICE = {"id": 1001, "first_name": "Alice"}
TOGGLES = 1_000


async def test_a_thousand_toggles_are_one_row(bot_running: StartBot, tmp_path: Path) -> None:
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    api, _llm, _process, store = await bot_running(model, BOT_LOCALE="en")
    model.add(Reply("hello"))
    api.push_update(api.user_message(CHAT, ALICE, "@test_bot hi"))
    await reply_stored(api, store, CHAT, 1)
    reply = api.sent_messages(CHAT)[0]["message_id"]
    for n in range(TOGGLES):
        on = n % 2 == 0
        api.push_update(
            api.reaction_update(
                CHAT, reply, ALICE, old=() if on else ("👍",), new=("👍",) if on else ()
            )
        )
    api.push_update(api.reaction_update(CHAT, reply, ALICE, new=("🔥",)))

    async def all_read() -> bool:
        found = await store.reactions_since(CHAT, 0, None, limit=10_000)
        return any(r.emoji == "🔥" for r in found)

    await eventually(all_read)
    with sqlite3.connect(tmp_path / "tgbot.sqlite3") as db:
        rows = db.execute(
            "SELECT user_id, message_id, emoji FROM reactions ORDER BY emoji"
        ).fetchall()
    db.close()
    assert sorted(rows) == sorted([(1001, reply, "👍"), (1001, reply, "🔥")])
