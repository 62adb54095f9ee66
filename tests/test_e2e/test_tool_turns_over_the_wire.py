"""Tool-using turns end to end: `tgbot run` as a subprocess, over real HTTP.

The bot process polls `FakeBotApi` and calls `FakeOpenAIServer` (both on 127.0.0.1); the
fake server's scripted model decides each answer and the server keeps every raw request
body, so the assertions read exactly what went over the wire. Proves: aliases reach the
Bot API as real ids (and an unknown alias sends nothing and comes back as an error), old
tool results shrink to 200 characters plus `…(已省略 N 字)` while the current turn's is
whole, the history segment stays within the scene budget with a breadcrumb right after
the system prompt, one ledger line per call, and stored records hold conversation only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import CallTool, Reply, ScriptedModel, Step
from bot.context.history_trim import BREADCRUMB_TEXT
from bot.context.tokens import estimate_message_tokens
from bot.domain.ids import SessionKey
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import StartBot, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1009876543210
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}
CHEN = {"id": 1003, "first_name": "Chen"}
GROUP_TOKENS = 900
TURN_CONTEXT = "\n\n[Turn context]\n"
CONFIG = f"""\
[history]
group_tokens = {GROUP_TOKENS}

[compaction]
enabled = false

[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0
"""


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="好的")


@dataclass
class Bot:
    api: FakeBotApi
    llm: FakeOpenAIServer
    model: ScriptedModel
    store: SqlStore
    data_dir: Path
    next_id: int = 7001
    replies: int = 0

    async def turn(self, user: dict[str, Any], text: str, *steps: Step) -> int:
        """One mention that the bot answers; returns when the answer is sent and stored."""
        self.model.add(*steps)
        message_id = self.next_id
        self.next_id += 10
        self.api.push_update(
            self.api.user_message(CHAT, user, f"@test_bot {text}", message_id=message_id)
        )
        self.replies += 1
        await reply_stored(self.api, self.store, CHAT, self.replies)
        return message_id

    def request(self, index: int) -> LLMRequest:
        return from_request(self.llm.requests[index])


@pytest.fixture
async def bot(bot_running: StartBot, tmp_path: Path) -> Bot:
    model = ScriptedModel(default=answer)
    api, llm, _process, store = await bot_running(
        model, config=CONFIG, BOT_LOCALE="zh", TGBOT_LOG_LEVEL="INFO"
    )
    return Bot(api=api, llm=llm, model=model, store=store, data_dir=tmp_path)


def current_index(request: LLMRequest) -> int:
    (index,) = [i for i, m in enumerate(request.messages) if TURN_CONTEXT in m.content]
    return index


async def test_tool_turns_budgets_and_the_ledger_over_the_wire(bot: Bot) -> None:
    # --- an alias reaches the Bot API as the real id of that message
    await bot.turn(ALICE, "你好")  # m1; the bot's answer is m2
    m2_id = bot.api.sent_messages(CHAT)[0]["message_id"]
    assert m2_id != 2
    await bot.turn(
        BOB, "请删除 m2", CallTool("delete_message", {"message_id": "m2"}), Reply("删好了")
    )
    (deleted,) = bot.api.calls_of("deleteMessage")
    assert (deleted["chat_id"], deleted["message_id"]) == (CHAT, m2_id)
    after_delete = bot.llm.requests[-1]["messages"]
    assert after_delete[-2]["tool_calls"][0]["function"]["arguments"] == '{"message_id":"m2"}'
    assert after_delete[-1]["role"] == "tool"
    assert json.loads(after_delete[-1]["content"])["deleted"] is True

    # --- an unknown alias sends nothing; the model reads an error in the next request
    calls_before = len(bot.api.calls)
    await bot.turn(
        CHEN, "删除 m999", CallTool("delete_message", {"message_id": "m999"}), Reply("做不到")
    )
    assert len(bot.api.calls_of("deleteMessage")) == 1
    sent_since = [
        name
        for name, _ in bot.api.calls[calls_before:]
        if name not in ("getUpdates", "sendChatAction")  # typing… while it thinks
    ]
    assert sent_since == ["sendMessage"]  # only the final answer
    error = bot.llm.requests[-1]["messages"][-1]
    assert error["role"] == "tool"
    assert error["content"].startswith("error[reference_not_confirmed]:")
    assert "m999" in error["content"]

    # --- the current turn's tool result is whole; a later turn shows 200 chars + a note
    long_text = " ".join(f"part {n}: the deploy plan needs one more check." for n in range(30))
    long_id = await bot.turn(
        ALICE,
        long_text,
        CallTool("inspect_conversation_reference", {"reference": "m7"}),
        Reply("看完了"),
    )
    whole = bot.llm.requests[-1]["messages"][-1]
    assert whole["role"] == "tool"
    entries = json.loads(whole["content"])["entries"]
    assert entries[0]["message_id"] == long_id
    assert entries[0]["text"] == f"@test_bot {long_text}"
    full_result = whole["content"]
    assert len(full_result) > 1400

    await bot.turn(BOB, "谢谢")
    later = bot.llm.requests[-1]["messages"]
    (old,) = [
        m for m in later if m["role"] == "tool" and m["content"].startswith(full_result[:200])
    ]
    assert old["content"] == full_result[:200] + f"…(已省略 {len(full_result) - 200} 字)"
    assert "[Turn context]" not in later[-2]["content"]

    # --- enough traffic: the history stays within the scene budget, with a breadcrumb
    for n in range(24):
        await bot.turn((ALICE, BOB, CHEN)[n % 3], f"第{n}条进度：构建通过，测试全绿，明天发布。")
    crumbed = 0
    for index in range(len(bot.llm.requests)):
        request = bot.request(index)
        messages = request.messages
        assert messages[0].role == "system"
        crumb = messages[1].content == BREADCRUMB_TEXT
        crumbed += crumb
        assert [m.content for m in messages].count(BREADCRUMB_TEXT) == int(crumb)
        if crumb:
            assert messages[1].role == "user"
        history = messages[1 + crumb : current_index(request)]
        assert sum(estimate_message_tokens(m) for m in history) <= GROUP_TOKENS, index
    assert crumbed > 0, "the window must have moved"
    assert bot.request(-1).messages[1].content == BREADCRUMB_TEXT

    # --- one ledger line per model call
    traces = sorted((bot.data_dir / "agent-traces").glob("*.jsonl"))
    lines = [line for path in traces for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(bot.llm.requests)
    assert all(json.loads(line)["model"] == "fake-model" for line in lines)

    # --- stored records are conversation only
    session = await bot.store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    path = await bot.store.load_path(session.id)
    assert len(path) > 50
    stored = repr([record.body for record in path])
    assert "@test_bot 谢谢" in stored
    for marker in ("[Turn context]", "[Already told the user]", "[Tool index]"):
        assert marker not in stored
    assert all(TURN_CONTEXT in bot.llm.requests[i]["messages"][-1]["content"] for i in (0, -1))
