"""Edit before message through `tgbot run`: Telegram may deliver an edit before the message
it edits (webhook workers take updates in parallel). The edit is stored as that message,
with its newest text, and answered when it triggers; the original, arriving after, is a
duplicate (stored once, answered once)."""

from __future__ import annotations

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import Reply, ScriptedModel
from bot.ports import LLMResponse
from tests.bot_process import StartBot, eventually, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1005550303
ALICE = {"id": 1001, "first_name": "Alice"}


async def test_an_edit_that_comes_first_is_stored_and_answered(bot_running: StartBot) -> None:
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    api, llm, process, store = await bot_running(model, BOT_LOCALE="en", TGBOT_LOG_LEVEL="INFO")
    model.add(Reply("the meeting is at 3"))
    edit = api.user_message(
        CHAT, ALICE, "@test_bot when is the meeting? (edited)", message_id=456, edit=True
    )
    original = api.user_message(CHAT, ALICE, "@test_bot when is the meting?", message_id=456)
    api.push_update(edit)
    await reply_stored(api, store, CHAT, 1)
    (reply,) = api.sent_messages(CHAT)
    assert reply["reply_to_message"]["message_id"] == 456
    (request,) = (from_request(body) for body in llm.requests)
    assert "when is the meeting? (edited)" in request.messages[-1].content

    api.push_update(original)

    async def seen_as_duplicate() -> bool:
        return "duplicate message" in process.log()

    await eventually(seen_as_duplicate)
    stored = await store.find_platform_message(CHAT, 456)
    assert stored is not None
    assert stored.text == "@test_bot when is the meeting? (edited)"
    assert len(api.sent_messages(CHAT)) == 1
    assert len(llm.requests) == 1
