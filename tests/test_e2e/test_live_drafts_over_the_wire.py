"""Live drafts through `tgbot run`: a private chat's reply streams from the OpenAI-compatible
fake over SSE, the bot previews it with `sendMessageDraft` (prefixes of the final text under
one draft id), then sends the final message; a refused draft turns drafts off for that chat
and the reply still arrives."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from tests.bot_process import StartBot, reply_stored

pytestmark = pytest.mark.slow

CHAT = 1001  # a private chat: Alice's own id
ALICE = {"id": CHAT, "first_name": "Alice"}
ANSWER = "We ship on Friday after the **last review**, " + "then we rest. " * 40
"""Streamed in pieces of 7 characters, one every `PIECE_SECONDS`: about three seconds in all,
so the reply earns drafts (one streamed within a second shows none). The first draft is
plain text (a draft cut inside `**…**` shows the asterisks until the span closes)."""
AGAIN = "again: Friday, " + "after the review. " * 20
"""The second reply, streamed over more than a second too, so it tries a draft."""
PIECE_SECONDS = 0.035


async def test_drafts_are_prefixes_of_the_reply_and_a_refusal_turns_them_off(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel([Reply(ANSWER), Reply(AGAIN)])
    api, llm, bot, store = await bot_running(model, BOT_LOCALE="en")
    llm.piece_delay = PIECE_SECONDS
    api.push_update(api.user_message(CHAT, ALICE, "when?", chat_type="private"))
    await reply_stored(api, store, CHAT, 1)
    assert llm.requests[0]["stream"] is True, "a private chat asks for a stream"
    final = "".join(str(m["text"]) for m in api.sent_messages(CHAT))
    assert "**" not in final, "Markdown became entities"
    drafts = api.calls_of("sendMessageDraft")
    assert drafts, bot.log_tail()
    assert len({d["draft_id"] for d in drafts}) == 1
    for draft in drafts:  # Markdown became entities: the text is what the reply shows
        assert final.startswith(str(draft["text"]).rstrip())
    order = [method for _, method, _ in api.timed_calls("sendMessageDraft", "sendMessage")]
    assert order[-1] == "sendMessage", "the final message comes after every draft"

    api.fail_next(
        "sendMessageDraft", error_code=400, description="Bad Request: method is not available"
    )
    refused_before = len(drafts)
    api.push_update(api.user_message(CHAT, ALICE, "sure?", chat_type="private"))
    await reply_stored(api, store, CHAT, 2)
    assert api.sent_messages(CHAT)[-1]["text"] == AGAIN.strip()
    assert len(api.calls_of("sendMessageDraft")) == refused_before + 1  # refused, then off
    assert await bot.stop() == 0, bot.log_tail()
