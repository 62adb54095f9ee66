"""Telegram's send limits through `tgbot run`: replies, tool posts and reactions are paced
(a second apart in a chat, at most 20 a minute in a group), nothing is dropped, a turn's
posts keep their order, a 429's `retry_after` pauses the chat; and a channel's
direct-messages topic is its own conversation, answered in the topic.

Spacing is read from the fake Bot API's arrival times. A request reaches it a little after
its slot, so a gap between two arrivals can be shorter than the pacing by that latency: the
checks allow half a second of it (an unpaced bot posts them milliseconds apart).
"""

from __future__ import annotations

import itertools
import re

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.domain.ids import SessionKey
from bot.domain.messages import ToolCall
from bot.ports import LLMRequest, LLMResponse
from tests.bot_process import QUIET_CONFIG, StartBot, eventually, reply_stored
from tests.deadlines import EVENT, deadline

GROUP = -1005550001
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}
LATENCY = 0.5
"""How much earlier than its slot a request may seem to arrive (the one before it was late)."""


def arrivals(api: object, method: str) -> list[float]:
    return [at for at, _name, _params in api.timed_calls(method)]  # type: ignore[attr-defined]


def most_in_a_minute(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 60) for start in times)


def reply_to_last(request: LLMRequest) -> LLMResponse:
    user = next(m.content for m in reversed(request.messages) if m.role == "user")
    return LLMResponse(text=f"re {user.split()[-1]}")


async def test_one_mention_with_five_tool_posts_and_a_reply_keeps_order_a_second_apart(
    bot_running: StartBot,
) -> None:
    posts = tuple(CallTool("send_message", {"text": f"part {n}"}) for n in range(1, 6))
    model = ScriptedModel([posts, Reply("that is all")])
    api, _llm, _bot, store = await bot_running(model)
    api.push_update(api.user_message(GROUP, ALICE, "@test_bot tell it in parts"))
    await reply_stored(api, store, GROUP, 6)

    texts = [m["text"] for m in api.sent_messages(GROUP)]
    assert texts == [f"part {n}" for n in range(1, 6)] + ["that is all"]
    times = arrivals(api, "sendMessage")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 1.0 - LATENCY, gaps
    assert times[-1] - times[0] >= 5.0 - LATENCY


def react_80_times(request: LLMRequest) -> LLMResponse:
    """Eight reactions a step for ten steps, then the answer."""
    if not request.tools or request.tool_choice == "none":
        return LLMResponse(text="reacted")
    trigger = next(m.content for m in reversed(request.messages) if m.role == "user")
    alias = re.search(r"\bid:(m\d+);", trigger)
    assert alias is not None, trigger
    step = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
    return LLMResponse(
        tool_calls=tuple(
            ToolCall(
                id=f"r{step}-{n}",
                name="set_reaction",
                arguments=f'{{"message_id": "{alias[1]}", "emoji": "👍"}}',
            )
            for n in range(8)
        )
    )


async def test_80_reactions_of_one_turn_are_paced_and_all_set(bot_running: StartBot) -> None:
    config = QUIET_CONFIG + "\n[telegram]\nper_chat_per_second = 10\n"
    model = ScriptedModel(default=react_80_times)
    api, _llm, _bot, store = await bot_running(model, config=config)
    api.push_update(api.user_message(GROUP, ALICE, "@test_bot react a lot"))
    await reply_stored(api, store, GROUP, 1)

    times = arrivals(api, "setMessageReaction")
    assert len(times) == 80  # every one was set
    assert times[-1] - times[0] >= 79 * 0.1 - LATENCY  # ten a second, not 80 at once
    # the reply waited its turn behind them
    assert arrivals(api, "sendMessage")[0] >= times[-1]


async def test_22_replies_asked_for_within_seconds_reach_a_group_at_most_20_a_minute(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=reply_to_last)
    api, _llm, _bot, store = await bot_running(model)
    for n in range(22):  # two members, each asking as soon as the last answer went out
        api.push_update(api.user_message(GROUP, (ALICE, BOB)[n % 2], f"@test_bot q{n}"))
        await api.wait_for_call("sendMessage", n + 1, timeout=deadline(EVENT) + 61)
    await reply_stored(api, store, GROUP, 22)

    answered = {m["reply_to_message"]["message_id"] for m in api.sent_messages(GROUP)}
    assert len(answered) == 22  # every question answered: nothing dropped
    times = arrivals(api, "sendMessage")
    assert most_in_a_minute(times) <= 20
    assert times[20] - times[0] >= 60  # the 21st waited for the first one's minute


async def test_a_429_pauses_the_chat_for_retry_after_and_the_reaction_still_lands(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=lambda _r: LLMResponse(text="done"))
    api, _llm, _bot, store = await bot_running(model)
    model.add(CallTool("set_reaction", {"message_id": "m1", "emoji": "👍"}), Reply("done"))
    api.fail_next("setMessageReaction", error_code=429,
                  description="Too Many Requests: retry after 2", retry_after=2)  # fmt: skip
    api.push_update(api.user_message(GROUP, ALICE, "@test_bot like this"))
    await reply_stored(api, store, GROUP, 1)

    refused, retried = arrivals(api, "setMessageReaction")
    assert retried - refused >= 2.0  # the retry waited the whole retry_after
    assert api.reactions
    assert api.reactions[-1][2] == ("👍",)
    (reply_at,) = arrivals(api, "sendMessage")
    assert reply_at >= refused + 2.0  # the chat's reply waited out the pause too


async def test_a_channel_direct_messages_topic_is_its_own_conversation_answered_there(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=reply_to_last)
    api, _llm, _bot, store = await bot_running(model, BOT_LOCALE="en")
    chat = api.direct_messages_chat(-1007770001, channel_id=-1007770000, title="Rocket News")
    chat_id = int(chat["id"])
    api.push_update(api.direct_message(chat_id, ALICE, "@test_bot hello from alice", topic_id=1001))
    await reply_stored(api, store, chat_id, 1)
    api.push_update(api.direct_message(chat_id, BOB, "@test_bot hello from bob", topic_id=1002))
    await reply_stored(api, store, chat_id, 2)

    calls = api.calls_of("sendMessage")
    assert [c.get("direct_messages_topic_id") for c in calls] == [1001, 1002]
    assert all("message_thread_id" not in c for c in calls)
    assert api.calls_of("sendChatAction") == []  # Telegram has none there

    async def two_sessions() -> bool:
        found = [
            await store.find_session(SessionKey(chat_id=chat_id, thread_id=topic))
            for topic in (1001, 1002)
        ]
        return all(s is not None for s in found)

    await eventually(two_sessions)
    alice = await store.find_session(SessionKey(chat_id=chat_id, thread_id=1001))
    assert alice is not None
    assert alice.title == "direct messages with Alice"
    # Bob's turn saw only Bob's topic, with its user named in the turn context
    last = model.requests[-1]
    seen = "\n".join(m.content for m in last.messages if m.role == "user")
    assert "hello from bob" in seen
    assert "hello from alice" not in seen
    assert "topic: direct messages with Bob" in seen


pytestmark = pytest.mark.slow
