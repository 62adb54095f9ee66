"""Issue 24 item 9 through `tgbot run`: `/usage` in a group where the bot may not send
photos. Telegram answers `sendPhoto` with a legal 400; the owner still gets the text answer,
once, and the message that came in the same batch is stored once and answered once."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.domain.ids import SessionKey
from bot.ports import LLMRequest, LLMResponse
from tests.bot_process import StartBot, eventually
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

GROUP = -1009876500024
OWNER = {"id": 42, "first_name": "Owner"}
ALICE = {"id": 1001, "first_name": "Alice"}
# the Bot API's answer when a member-level bot may not post media in a group
NO_PHOTOS = "Bad Request: not enough rights to send photos to the chat"


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="noted")


async def test_usage_chart_refused_with_a_400_still_answers_the_owner_once(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=answer)
    api, _llm, bot, store = await bot_running(model)
    api.fail_next("sendPhoto", error_code=400, description=NO_PHOTOS)
    # one batch: the command, then a mention after it
    api.push_update(api.user_message(GROUP, OWNER, "/usage", chat_title="Team", message_id=10))
    api.push_update(
        api.user_message(GROUP, ALICE, "@test_bot hello", chat_title="Team", message_id=11)
    )
    await api.wait_for_call("sendPhoto")
    await api.wait_for_call("sendMessage", 2, timeout=deadline(EVENT))

    async def mention_stored() -> bool:
        session = await store.find_session(SessionKey(chat_id=GROUP))
        return session is not None and (await store.find_platform_message(GROUP, 11) is not None)

    await eventually(mention_stored)
    # a later update proves the batch is behind us: nothing is handled again
    api.push_update(
        api.user_message(GROUP, ALICE, "@test_bot again", chat_title="Team", message_id=12)
    )
    await api.wait_for_call("sendMessage", 3, timeout=deadline(EVENT))
    await bot.stop()

    sent = api.sent_messages(GROUP)
    replies_to = [m.get("reply_to_message", {}).get("message_id") for m in sent]
    assert replies_to.count(10) == 1, sent  # the /usage text, once
    assert replies_to.count(11) == 1, sent  # the mention of the same batch, answered once
    assert len(api.calls_of("sendPhoto")) == 1
    assert "Traceback" not in bot.log()
    assert len(model.requests) == 2
