"""Live drafts through `tgbot run`: a private chat's reply streams from the OpenAI-compatible
fake over SSE, the bot previews it with `sendMessageDraft` (prefixes of the final text under
one draft id), then sends the final message; a refused draft turns drafts off for that chat
and the reply still arrives."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.llm.fake_server import FakeOpenAIServer
from adapters.llm.scripted import Reply, ScriptedModel
from adapters.telegram.fake_api import FakeBotApi
from tests.bot_process import bot_running, reply_stored, sqlite_store

pytestmark = pytest.mark.slow

CHAT = 1001  # a private chat: Alice's own id
ALICE = {"id": CHAT, "first_name": "Alice"}
ANSWER = "We ship on **Friday** after the last review, " + "then we rest. " * 40
CONFIG = """\
[triggers]
merge_window_seconds = 0
"""


async def test_drafts_are_prefixes_of_the_reply_and_a_refusal_turns_them_off(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(CONFIG, encoding="utf-8")
    model = ScriptedModel([Reply(ANSWER), Reply("again: Friday")])
    async with (
        FakeBotApi(username="test_bot") as api,
        FakeOpenAIServer(model) as llm,
        sqlite_store(tmp_path) as store,
        bot_running(
            api, llm, tmp_path, LLM_API_KEY="sk-test", BOT_LOCALE="en", BOT_CONFIG=str(config)
        ) as bot,
    ):
        api.push_update(api.user_message(CHAT, ALICE, "when?", chat_type="private"))
        await reply_stored(api, store, CHAT, 1)
        assert llm.requests[0]["stream"] is True, "a private chat asks for a stream"
        final = "".join(str(m["text"]) for m in api.sent_messages(CHAT))
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
        assert api.sent_messages(CHAT)[-1]["text"] == "again: Friday"
        assert len(api.calls_of("sendMessageDraft")) == refused_before + 1  # refused, then off
        assert await bot.stop() == 0, bot.log_tail()
