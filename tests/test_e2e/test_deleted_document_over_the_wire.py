"""Issue 50, item 1: a deleted message's words go everywhere a tool showed them.

`tgbot run` against the fake Bot API: Alice posts a CSV, the bot reads it (`read_document`),
then deletes it at her request (`delete_message`). From then on no request the model is sent
carries the file's words, whether in the old tool result the window shows or through
`expand_tool_result`; the deletion's result tells the model the bot's own replies stay and
to offer to delete them.
"""

from __future__ import annotations

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.ports import LLMResponse
from tests.bot_process import StartBot, eventually, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1007770050
ALICE = {"id": 1001, "first_name": "Alice"}
SECRET = "north,1234567\nsouth,7654321\n"


async def test_a_deleted_documents_words_leave_the_tool_results(bot_running: StartBot) -> None:
    model = ScriptedModel(default=lambda _r: LLMResponse(text="ok"))
    api, _llm, _bot, store = await bot_running(model)
    api.push_update(
        api.media_message(
            CHAT, ALICE, "", kind="document", data=b"region,amount\n" + SECRET.encode(),
            file_id="BQAD-secret", file_name="sales.csv", mime_type="text/csv", message_id=900,
        )
    )  # fmt: skip

    async def stored() -> bool:
        return await store.find_platform_message(CHAT, 900) is not None

    await eventually(stored)
    model.add(CallTool("read_document", {"reference": "m1"}, id="read_1"), Reply("read it"))
    api.push_update(api.user_message(CHAT, ALICE, "@test_bot read my file", message_id=901))
    await reply_stored(api, store, CHAT, 1)
    read = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert any("1234567" in content for content in read), read  # it was read

    model.add(CallTool("delete_message", {"message_id": "m1"}), Reply("deleted"))
    api.push_update(api.user_message(CHAT, ALICE, "@test_bot delete my file", message_id=903))
    await reply_stored(api, store, CHAT, 2)
    assert [int(c["message_id"]) for c in api.calls_of("deleteMessage")] == [900]
    (deletion,) = [m.content for m in model.requests[-1].messages if m.role == "tool"][-1:]
    assert "replies" in deletion
    assert "offer to delete" in deletion

    before = len(model.requests)
    model.add(CallTool("expand_tool_result", {"tool_call_id": "read_1"}), Reply("nothing"))
    api.push_update(api.user_message(CHAT, ALICE, "@test_bot what did it say?", message_id=905))
    await reply_stored(api, store, CHAT, 3)
    later = model.requests[before:]
    assert len(later) == 2
    for request in later:
        for message in request.messages:
            assert "1234567" not in message.content, message.content
            assert "7654321" not in message.content, message.content
