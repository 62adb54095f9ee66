"""Recall beyond the window through `tgbot run`: the model calls search_history, in Chinese
and English, on SQLite and PostgreSQL.

A group chat says something worth remembering, then enough else that it leaves the window
(a small group budget, compaction off, so no summary holds it either). A member asks; the
scripted model searches, reads the quote line, reacts to the message it found by the alias
the search showed (the alias reaches the Bot API as the message's real id), and answers.
Another chat says the same words: its message never appears.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.domain.messages import ToolCall
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import StartBot, eventually, reply_stored
from tests.test_storage.conftest import POSTGRES_URL, reset_postgres

pytestmark = pytest.mark.slow

CHAT = -1005550001
OTHER = -1005550002
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}
CONFIG = """\
[history]
group_tokens = 400

[compaction]
enabled = false

[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0
"""

CASES = {
    "en": {
        "fact": "the wifi password is Tr0ub4dor-42, don't share it",
        "other_chat": "our wifi password is NOT-THIS-ONE",
        "filler": "status update {n}: the wifi in room {n} works, the build is green",
        "question": "what was the wifi password Alice posted?",
        "query": "wifi password",
        "secret": "Tr0ub4dor-42",
    },
    "zh": {
        "fact": "无线网密码是 Tr0ub4dor-42，别外传",
        "other_chat": "我们的无线网密码是 NOT-THIS-ONE",
        "filler": "第{n}条进度：会议室无线网正常，构建通过。",
        "question": "Alice 之前发的无线网密码是什么？",
        "query": "无线网密码",
        "secret": "Tr0ub4dor-42",
    },
}


@dataclass
class Chat:
    api: FakeBotApi
    llm: FakeOpenAIServer
    model: ScriptedModel
    store: SqlStore
    next_id: int = 9001

    async def say(self, user: dict[str, Any], text: str, *, chat: int = CHAT) -> int:
        """A group message the bot stores but does not answer."""
        message_id = self.next_id
        self.next_id += 1
        self.api.push_update(self.api.user_message(chat, user, text, message_id=message_id))

        async def stored() -> bool:
            return await self.store.find_platform_message(chat, message_id) is not None

        await eventually(stored)
        return message_id


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def chat(request: pytest.FixtureRequest, bot_running: StartBot) -> Chat:
    settings: dict[str, str] = {}
    if request.param == "postgres":
        if POSTGRES_URL is None:
            pytest.skip("TEST_POSTGRES_URL is not set (run under scripts/with-postgres)")
        await reset_postgres(POSTGRES_URL)
        settings["DATABASE_URL"] = POSTGRES_URL
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    api, llm, _process, store = await bot_running(
        model, config=CONFIG, BOT_LOCALE="zh", TGBOT_LOG_LEVEL="INFO", **settings
    )
    return Chat(api=api, llm=llm, model=model, store=store)


_LINE = re.compile(r"\[quote id:([^;\]]{1,40});[^\]\n]{0,300}\] [^\n]{0,400}")


def react_to_first_hit(request: LLMRequest) -> LLMResponse:
    """What a model does after reading the result: act on the message it found."""
    result = request.messages[-1].content
    match = _LINE.match(result)
    assert match is not None, result
    arguments = json.dumps({"message_id": match.group(1), "emoji": "👍"})
    return LLMResponse(
        tool_calls=(ToolCall(id="react_1", name="set_reaction", arguments=arguments),)
    )


@pytest.mark.parametrize("locale", ["en", "zh"])
async def test_the_model_recalls_what_left_the_window(chat: Chat, locale: str) -> None:
    case = CASES[locale]
    fact_id = await chat.say(ALICE, case["fact"])
    await chat.say(BOB, case["other_chat"], chat=OTHER)
    for n in range(40):
        await chat.say((ALICE, BOB)[n % 2], case["filler"].format(n=n))

    chat.model.add(
        CallTool("search_history", {"query": case["query"]}),
        react_to_first_hit,
        Reply(f"Alice: {case['secret']}"),
    )
    question = chat.next_id
    chat.next_id += 1
    chat.api.push_update(
        chat.api.user_message(CHAT, BOB, f"@test_bot {case['question']}", message_id=question)
    )
    await reply_stored(chat.api, chat.store, CHAT, 1)

    first = chat.model.requests[0]
    assert all(case["secret"] not in m.content for m in first.messages), "still in the window"
    assert "search_history" in first.messages[0].content  # the prompt says when to search
    searched = chat.model.requests[1].messages[-1]
    assert searched.role == "tool"
    top = searched.content.splitlines()[0]
    assert top.startswith("[quote id:m1;user:Alice;user_id:1001;date:"), searched.content
    assert top.endswith(case["fact"])
    assert "NOT-THIS-ONE" not in searched.content  # never another chat
    (reaction,) = chat.api.calls_of("setMessageReaction")
    assert (reaction["chat_id"], reaction["message_id"]) == (CHAT, fact_id)
    reacted = chat.model.requests[2].messages[-1]
    assert reacted.role == "tool"
    assert not reacted.content.startswith("error"), reacted.content
    assert chat.api.sent_messages(CHAT)[-1]["text"] == f"Alice: {case['secret']}"

    # --- a later turn: the search result is an ordinary old tool result, shrunk; the alias
    # it still shows is a valid reference (issue 35), though m1 left the window long ago
    chat.model.add(CallTool("set_reaction", {"message_id": "m1", "emoji": "🔥"}), Reply("ok"))
    chat.api.push_update(chat.api.user_message(CHAT, ALICE, "@test_bot thanks", message_id=99999))
    await reply_stored(chat.api, chat.store, CHAT, 2)
    later = chat.model.requests[-1].messages
    assert later[-1].role == "tool"
    assert not later[-1].content.startswith("error"), later[-1].content
    again = chat.api.calls_of("setMessageReaction")[-1]
    assert (again["chat_id"], again["message_id"]) == (CHAT, fact_id)
    (old,) = [m for m in later if m.role == "tool" and m.content.startswith(top[:100])]
    assert len(searched.content.splitlines()) == 5  # the limit; fillers name the wifi too
    assert old.content.startswith(searched.content[:200])
    assert old.content.endswith("字)")
    assert len(old.content) < len(searched.content)
