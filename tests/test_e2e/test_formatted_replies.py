"""Issue 13 "Replies people can read", end to end: `tgbot run` as a subprocess over real HTTP.

The scripted model answers in Markdown. The member sees formatted text (Telegram entities,
no asterisks), a bubble whose entities Telegram rejects arrives as plain text, and the
conversation keeps the model's words as written: the stored record and the next request
to the model hold the Markdown, so the cached prefix does not change.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess, StartBot, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1009876500001
ALICE = {"id": 1001, "first_name": "Alice"}
PLAN = "## Plan\n\n1. **Build** with `make`\n2. Read [the notes](https://example.com/notes)"
FALLBACK = "_Done_ — **all green**."


@dataclass
class Running:
    api: FakeBotApi
    llm: FakeOpenAIServer
    model: ScriptedModel
    store: SqlStore
    process: BotProcess
    next_id: int = 5001
    replies: int = 0

    async def ask(self, text: str, answer: str) -> None:
        """One mention answered with `answer`; returns once the reply is stored."""
        self.model.add(Reply(answer))
        self.api.push_update(
            self.api.user_message(CHAT, ALICE, f"@test_bot {text}", message_id=self.next_id)
        )
        self.next_id += 10
        self.replies += 1
        await reply_stored(self.api, self.store, CHAT, self.replies)


def default_answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="ok")


@pytest.fixture
async def running(bot_running: StartBot) -> Running:
    model = ScriptedModel(default=default_answer)
    api, llm, process, store = await bot_running(model, BOT_LOCALE="en", TGBOT_LOG_LEVEL="INFO")
    return Running(api=api, llm=llm, model=model, store=store, process=process)


async def test_markdown_replies_are_formatted_for_people_and_kept_as_written(
    running: Running,
) -> None:
    api = running.api
    await running.ask("what is the plan?", PLAN)
    (plan,) = api.sent_messages(CHAT)
    assert plan["text"] == "Plan\n\n1. Build with make\n2. Read the notes"
    assert plan["entities"] == [
        {"type": "bold", "offset": 0, "length": 4},
        {"type": "bold", "offset": 9, "length": 5},
        {"type": "code", "offset": 20, "length": 4},
        {"type": "text_link", "offset": 33, "length": 9, "url": "https://example.com/notes"},
    ]

    # --- Telegram refuses the entities once: the same words arrive as plain text
    api.reject_entities()
    await running.ask("and now?", FALLBACK)
    rejected, resent = api.calls_of("sendMessage")[-2:]
    assert rejected["entities"]
    assert resent["text"] == rejected["text"] == "Done — all green."
    assert "entities" not in resent
    assert api.sent_messages(CHAT)[-1]["text"] == "Done — all green."

    # --- the conversation holds the model's Markdown, in the store and in the next request
    await running.ask("thanks", "You're welcome.")
    session = await running.store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    path = await running.store.load_path(session.id)
    replies = [r.body.text for r in path if isinstance(r.body, AssistantRecord)]
    assert replies == [PLAN, FALLBACK, "You're welcome."]
    last = running.llm.requests[-1]["messages"]
    assistant = [m["content"] for m in last if m["role"] == "assistant"]
    assert len(assistant) == 2
    assert assistant[0].endswith(PLAN)
    assert assistant[1].endswith(FALLBACK)

    # --- and the refusal was logged, once the process has stopped and flushed its log
    assert await running.process.stop() == 0
    assert "sending it as plain text" in running.process.log()
