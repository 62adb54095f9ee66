"""Deleted means gone, through `tgbot run` on SQLite and PostgreSQL.

Carol posts a PIN in the group; Bob's search shows it; the owner has the bot delete it
(`delete_message` by alias). From that tool call on, no request carries her words: the same
turn's next call and every later one show `[deleted]` under her header and in Bob's old
search hit, a new `search_history` finds nothing, and a member who quoted her keeps the
relation, not the words. A caption a member edits away
leaves with the edit (the photo stays).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import StartBot, eventually, reply_stored
from tests.test_storage.conftest import POSTGRES_URL, reset_postgres

pytestmark = pytest.mark.slow

CHAT = -1005550101
OWNER = {"id": 42, "first_name": "Owner"}
CAROL = {"id": 1003, "first_name": "Carol"}
BOB = {"id": 1002, "first_name": "Bob"}
SECRET = "bankpin5519"
CONFIG = """\
[compaction]
enabled = false

[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0
"""


@dataclass
class Group:
    api: FakeBotApi
    llm: FakeOpenAIServer
    model: ScriptedModel
    store: SqlStore
    replies: int = 0

    async def say(self, user: dict[str, Any], text: str, **extra: Any) -> int:
        update = self.api.user_message(CHAT, user, text, **extra)
        self.api.push_update(update)
        message_id = int(update["message"]["message_id"])

        async def stored() -> bool:
            return await self.store.find_platform_message(CHAT, message_id) is not None

        await eventually(stored)
        return message_id

    async def ask(self, user: dict[str, Any], text: str) -> None:
        self.api.push_update(self.api.user_message(CHAT, user, f"@test_bot {text}"))
        self.replies += 1
        await reply_stored(self.api, self.store, CHAT, self.replies)

    def request(self, index: int) -> LLMRequest:
        return from_request(self.llm.requests[index])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def group(request: pytest.FixtureRequest, bot_running: StartBot) -> Group:
    settings: dict[str, str] = {}
    if request.param == "postgres":
        if POSTGRES_URL is None:
            pytest.skip("TEST_POSTGRES_URL is not set (run under scripts/with-postgres)")
        await reset_postgres(POSTGRES_URL)
        settings["DATABASE_URL"] = POSTGRES_URL
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    api, llm, _process, store = await bot_running(model, config=CONFIG, BOT_LOCALE="en", **settings)
    return Group(api=api, llm=llm, model=model, store=store)


def carried(request: LLMRequest) -> str:
    return "\n".join(message.content for message in request.messages)


async def test_a_deleted_message_is_gone_from_requests_and_search(group: Group) -> None:
    pin = await group.say(CAROL, f"my {SECRET} is 5519, don't tell")  # m1
    await group.say(BOB, "got it", reply_to=pin)  # m2, quotes m1
    # Bob searched before the deletion: the hit (her words) is kept in his turn's results
    group.model.add(CallTool("search_history", {"query": "tell"}), Reply("she posted a pin"))
    await group.ask(BOB, "what did Carol tell us?")  # m3, answered by m4
    assert SECRET in carried(group.request(1))  # the hit
    group.model.add(CallTool("delete_message", {"message_id": "m1"}), Reply("deleted"))
    await group.ask(OWNER, "please delete m1")
    (deleted,) = group.api.calls_of("deleteMessage")
    assert (deleted["chat_id"], deleted["message_id"]) == (CHAT, pin)
    before, after = group.request(2), group.request(3)
    assert SECRET in carried(before)  # it was there until the deletion
    assert SECRET not in carried(after)  # the same turn's next call no longer carries it
    assert "[id:m1;user:Carol;user_id:1003;" in carried(after)
    assert "\n[deleted]" in carried(after)
    assert "[quote id:m1;user:Carol;user_id:1003;" in carried(after)  # the hit's fields stay

    group.model.add(CallTool("search_history", {"query": SECRET}), Reply("nothing found"))
    await group.ask(BOB, "what was Carol's bank pin?")
    asked, searched = group.request(4), group.request(5)
    assert SECRET not in carried(asked)
    assert "don't tell" not in carried(searched)  # the query holds the word, not her message
    result = searched.messages[-1]
    assert result.role == "tool"
    assert result.content.startswith("no message"), result.content
    stored = await group.store.find_platform_message(CHAT, pin)
    assert stored is not None
    assert stored.text == ""


async def test_a_caption_edited_away_leaves_with_the_edit(group: Group) -> None:
    update = group.api.user_message(CHAT, CAROL, "")
    photo = update["message"]
    del photo["text"]
    photo["photo"] = [{"file_id": "p1", "file_unique_id": "u1", "width": 90, "height": 90}]
    photo["caption"] = f"my {SECRET} card"
    group.api.push_update(update)
    group.model.add(Reply("first"))
    await group.ask(BOB, "hello")
    assert SECRET in carried(group.request(0))

    edited = {**photo, "edit_date": photo["date"] + 5}
    del edited["caption"]
    group.api.push_update({"edited_message": edited})

    async def caption_gone() -> bool:
        found = await group.store.find_platform_message(CHAT, photo["message_id"])
        return found is not None and found.text == ""

    await eventually(caption_gone)
    group.model.add(Reply("second"))
    await group.ask(BOB, "hello again")
    later = carried(group.request(1))
    assert SECRET not in later
    assert "[id:m1;user:Carol;user_id:1003;" in later  # the photo stays, without its words
