"""Today's models think: `tgbot run` against fakes that refuse, as their providers do, a
request that does not give the model's reasoning back (testkit/fake_reasoning.py).

For DeepSeek V4 on chat completions and on its Anthropic-format endpoint, Claude with
adaptive thinking and Gemini 3 with thought signatures: a private chat with a 3-round tool
loop, five more turns (two with tool loops), then a SIGKILL while the second model call of
a loop is in flight and a restart, which continues the turn from its stored tool results.
Every turn is answered and no request is refused.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.domain.messages import ToolCall
from bot.domain.records import AssistantRecord
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_reasoning import (
    ClaudeThinking,
    DeepSeekAnthropicThinking,
    DeepSeekThinking,
    GeminiThinking,
    ThinkingModel,
)
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess
from tests.deadlines import EVENT, deadline
from tests.test_reliability.conftest import SETTINGS, GatedModel, path_of

pytestmark = pytest.mark.slow

DANA = {"id": 5001, "first_name": "Dana"}
LOOPS = re.compile(r"loop (\d)")


@dataclass(frozen=True)
class Thinker:
    name: str
    anthropic: bool
    thinking: Callable[[], ThinkingModel]
    settings: dict[str, str]


THINKERS = [
    Thinker("deepseek-v4", False, DeepSeekThinking, {"LLM_MODEL": "deepseek-v4-flash"}),
    Thinker(
        "deepseek-v4-anthropic",
        True,
        DeepSeekAnthropicThinking,
        {"LLM_MODEL": "deepseek-v4-flash", "LLM_KIND": "anthropic"},
    ),
    Thinker(
        "claude-adaptive",
        True,
        ClaudeThinking,
        {"LLM_MODEL": "claude-opus-4-7", "LLM_KIND": "anthropic", "LLM_REASONING": "high"},
    ),
    Thinker("gemini-3", False, GeminiThinking, {"LLM_MODEL": "gemini-3-flash-preview"}),
]


def respond(request: LLMRequest) -> LLMResponse:
    """`loop N` asks for N rounds of tool calls before the answer; anything else an echo."""
    users = [i for i, m in enumerate(request.messages) if m.role == "user"]
    current = request.messages[users[-1]].content if users else ""
    rounds = sum(1 for m in request.messages[users[-1] :] if m.role == "tool") if users else 0
    wanted = LOOPS.search(current)
    if wanted is None:
        return LLMResponse(text=f"Answer {len(users)}.")
    if rounds < int(wanted[1]):
        reference = '{"reference": "m1"}'
        call = ToolCall(
            id=f"call_{len(users)}_{rounds}",
            name="inspect_conversation_reference",
            arguments=reference,
        )
        return LLMResponse(tool_calls=(call,))
    return LLMResponse(text=f"Looked {rounds} times.")


def second_call_of_the_last_loop(request: LLMRequest) -> bool:
    users = [i for i, m in enumerate(request.messages) if m.role == "user"]
    if not users or "again" not in request.messages[users[-1]].content:
        return False
    return sum(1 for m in request.messages[users[-1] :] if m.role == "tool") == 1


@pytest.fixture(params=THINKERS, ids=[t.name for t in THINKERS])
def thinker(request: pytest.FixtureRequest) -> Thinker:
    chosen: Thinker = request.param
    return chosen


@pytest.fixture
async def llm(thinker: Thinker) -> AsyncIterator[FakeOpenAIServer]:
    server: FakeOpenAIServer
    if thinker.anthropic:
        server = FakeAnthropicServer(thinking=thinker.thinking())
    else:
        server = FakeOpenAIServer(thinking=thinker.thinking())
    async with server:
        yield server


@pytest.fixture
async def bot(
    api: FakeBotApi, llm: FakeOpenAIServer, thinker: Thinker, tmp_path: Path
) -> AsyncIterator[BotProcess]:
    process = BotProcess(api, llm, tmp_path, **{**SETTINGS, **thinker.settings})
    try:
        yield process
    finally:
        if process.process is not None and process.process.poll() is None:
            process.kill()


async def test_a_thinking_model_answers_every_turn_through_tool_loops_and_a_crash(
    bot: BotProcess, api: FakeBotApi, llm: FakeOpenAIServer, db: SqlStore
) -> None:
    thinking = llm.thinking
    assert thinking is not None
    model = GatedModel(respond, hold=second_call_of_the_last_loop)
    llm.model = model
    await bot.start()

    questions = ["loop 3", "hello", "loop 1", "how are you", "loop 2", "thanks"]
    answers = ["Looked 3 times."]
    for number, question in enumerate(questions, start=1):
        api.push_update(api.user_message(DANA["id"], DANA, question, chat_type="private"))
        await api.wait_for_call("sendMessage", number, timeout=deadline(EVENT))
        if number > 1:
            answers.append(api.sent_messages(DANA["id"])[-1]["text"])
    assert [m["text"] for m in api.sent_messages(DANA["id"])][:1] == ["Looked 3 times."]
    assert answers[2] == "Looked 1 times."
    assert answers[4] == "Looked 2 times."

    # the seventh turn: killed while its second model call (after one round) is in flight
    api.push_update(api.user_message(DANA["id"], DANA, "loop 2 again", chat_type="private"))
    await model.held.wait()
    bot.kill()
    model.gate.set()
    await bot.start()
    await api.wait_for_call("sendMessage", 7, timeout=deadline(EVENT))
    await bot.stop()

    sent = [m["text"] for m in api.sent_messages(DANA["id"])]
    assert len(sent) == 7
    assert sent[-1] == "Looked 2 times."
    assert thinking.refused == []  # no provider 400, before or after the restart
    path = await path_of(db, DANA["id"])
    calls = [r.body for r in path if isinstance(r.body, AssistantRecord) and r.body.tool_calls]
    assert len(calls) == 3 + 1 + 2 + 2
    assert all(call.reasoning is not None for call in calls)
