"""Issue 17's acceptance: a busy group sees its conversation and remembers what left.

`tgbot run` as a subprocess polls `FakeBotApi`; replies come from one `FakeOpenAIServer`,
summaries from a second one (the configured compaction route), both on 127.0.0.1, so the
assertions read exactly what went over the wire. 700 short group messages then a mention:
the history stays within the 8,000-token group budget and holds at least 75 % of the
message cap, with the model's summary right after the breadcrumb; two more mentions with
little traffic share their prefix; with the summary route returning errors, members are
still answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import Reply, ScriptedModel
from bot.context.compaction import INSTRUCTION_MARKER, SUMMARY_PREFIX
from bot.context.history_trim import BREADCRUMB_TEXT
from bot.context.tokens import estimate_message_tokens
from bot.ports import LLMRequest, LLMResponse
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import StartBot
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

CHAT = -1001234500017
PEOPLE = [{"id": 2001 + n, "first_name": name} for n, name in enumerate(("Ann", "Bo", "Cy"))]
CAP = 300  # the group message cap by default
SUMMARY = "Ann, Bo and Cy traded short notes; Bo asked about the build in m3."
TURN_CONTEXT = "\n\n[Turn context]\n"


def config(summary_url: str) -> str:
    return f"""\
[compaction]
route = "summaries"

[providers.summaries]
base_url = "{summary_url}"
model = "fake-model"

[runtime]
max_retries = 0

[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0
"""


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="ok")


@dataclass
class Group:
    api: FakeBotApi
    llm: FakeOpenAIServer
    summaries: FakeOpenAIServer
    next_id: int = 1
    replies: int = 0

    def chatter(self, count: int) -> None:
        for _ in range(count):
            person = PEOPLE[self.next_id % 3]
            self.api.push_update(
                self.api.user_message(CHAT, person, f"n{self.next_id} ok", message_id=self.next_id)
            )
            self.next_id += 1

    async def mention(self, text: str) -> LLMRequest:
        """A mention the bot answers; returns the reply request the model received."""
        before = len(self.llm.requests)
        self.api.push_update(
            self.api.user_message(CHAT, PEOPLE[0], f"@test_bot {text}", message_id=self.next_id)
        )
        self.next_id += 1
        self.replies += 1
        await self.api.wait_for_call("sendMessage", self.replies, timeout=deadline(EVENT))
        assert len(self.llm.requests) == before + 1
        return from_request(self.llm.requests[-1])


@pytest.fixture
async def group(bot_running: StartBot) -> AsyncIterator[Group]:
    model = ScriptedModel(default=answer)
    summarizer = ScriptedModel(summaries=[Reply(SUMMARY)])
    async with FakeOpenAIServer(summarizer) as summaries:
        api, llm, process, _store = await bot_running(
            model, config=config(summaries.base_url), BOT_LOCALE="en"
        )
        yield Group(api=api, llm=llm, summaries=summaries)
        assert await process.stop() == 0, process.log_tail()  # before its summary route closes


async def test_a_busy_group_keeps_its_window_and_its_memory(group: Group) -> None:
    group.chatter(700)
    first = await group.mention("what did we say?")

    # the history stays within the budget and holds at least 75 % of the message cap
    (current,) = [i for i, m in enumerate(first.messages) if TURN_CONTEXT in m.content]
    history = first.messages[1:current]
    assert sum(estimate_message_tokens(m) for m in history) <= 8_000
    conversation = [m for m in first.messages[3 : current + 1] if m.role in ("user", "assistant")]
    assert len(conversation) >= CAP * 3 // 4

    # the model's summary sits right after the breadcrumb
    assert first.messages[1].content == BREADCRUMB_TEXT
    title, text = first.messages[2].content.split("\n", 1)
    assert title.startswith(SUMMARY_PREFIX + " m")
    assert text == SUMMARY
    (fold,) = [from_request(body) for body in group.summaries.requests]
    assert fold.tool_choice == "none"
    assert fold.messages[-1].content.startswith(INSTRUCTION_MARKER)
    assert fold.messages[0] == first.messages[0]  # same system prompt

    # two further mentions with little traffic share their prefix
    group.chatter(3)
    second = await group.mention("and then?")
    group.chatter(3)
    third = await group.mention("anything else?")
    for earlier, later in ((first, second), (second, third)):
        shared = len(earlier.messages) - 1
        assert [m.content for m in later.messages[:shared]] == [
            m.content for m in earlier.messages[:shared]
        ]

    # the summary route fails from now on: the member is still answered
    group.summaries.fail_next(503, {"error": {"message": "down", "type": "server_error"}}, times=50)
    group.chatter(CAP // 3)  # past the cap again: the window moves
    calls_before = len(group.summaries.requests)
    fourth = await group.mention("still with us?")
    assert len(group.summaries.requests) > calls_before  # the fold was tried, and failed
    assert fourth.messages[1].content == BREADCRUMB_TEXT
    # the move waits for a good fold: the last good summary is shown as it was, nothing lost
    assert third.messages[2].content.startswith(SUMMARY_PREFIX)
    assert fourth.messages[2].content == third.messages[2].content
    sent = group.api.sent_messages(CHAT)
    assert sent[-1]["text"] == "ok"
