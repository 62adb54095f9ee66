"""`BOT_LOCALE` unset (`auto`) through `tgbot run`: each member hears a command's answer in
their own Telegram language, and the model is told the group's language, the one most of its
recent members write with; `BOT_LOCALE=zh` still forces Chinese on everyone."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.ports import LLMRequest, LLMResponse
from bot.texts import text
from tests.bot_process import StartBot
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

GROUP = -1009876500037
ALICE = {"id": 1001, "first_name": "Alice", "language_code": "en"}
BOB = {"id": 1002, "first_name": "Bob", "language_code": "en-GB"}
CHEN = {"id": 1003, "first_name": "晨", "language_code": "zh-hans"}


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="noted")


def _system(request: LLMRequest) -> str:
    return str(request.messages[0].content)


async def test_auto_answers_each_member_in_their_language(bot_running: StartBot) -> None:
    model = ScriptedModel(default=answer)
    api, _llm, bot, _store = await bot_running(model)  # BOT_LOCALE unset: auto
    api.push_update(api.user_message(GROUP, ALICE, "morning all", chat_title="Team"))
    api.push_update(api.user_message(GROUP, BOB, "morning", chat_title="Team"))
    api.push_update(api.user_message(GROUP, CHEN, "/help", chat_title="Team", message_id=50))
    api.push_update(api.user_message(GROUP, ALICE, "/help", chat_title="Team", message_id=51))
    await api.wait_for_call("sendMessage", 2, timeout=deadline(EVENT))
    api.push_update(api.user_message(GROUP, CHEN, "@test_bot 你好", chat_title="Team"))
    await api.wait_for_call("sendMessage", 3, timeout=deadline(EVENT))
    await bot.stop()

    replies = {
        m["reply_to_message"]["message_id"]: m["text"]
        for m in api.sent_messages(GROUP)
        if "reply_to_message" in m
    }
    assert replies[50] == text("zh", "help")
    assert replies[51] == text("en", "help")
    # the group is two English speakers to one Chinese: the prompt says English
    (request,) = model.requests
    assert "Chinese" not in _system(request)
    assert "English" in _system(request)


async def test_a_forced_locale_wins_over_the_member_language(bot_running: StartBot) -> None:
    model = ScriptedModel(default=answer)
    api, _llm, bot, _store = await bot_running(model, BOT_LOCALE="zh")
    api.push_update(api.user_message(GROUP, ALICE, "/help", chat_title="Team", message_id=60))
    await api.wait_for_call("sendMessage", 1, timeout=deadline(EVENT))
    await bot.stop()
    (sent,) = api.sent_messages(GROUP)
    assert sent["text"] == text("zh", "help")
