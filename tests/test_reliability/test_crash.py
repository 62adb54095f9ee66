"""SIGKILL the bot process in the middle of turns, start it again on the same data, and check
that nothing was lost or doubled and that every interrupted turn completes or ends with a
clear message.

Starting the process costs seconds (aiogram's import alone), so one run interrupts four
chats at once at four different points and kills the process once:

- chat A: after its message was stored, while the model call is in flight;
- group B: inside a tool call (the Bot API's deleteMessage hangs), before its result;
- chat C: between the two bubbles of a long reply (the second sendMessage hangs);
- twelve chats D: while a burst of 36 messages is being taken in.
"""

from __future__ import annotations

import pytest

from bot.domain.messages import ToolCall
from bot.domain.records import AssistantRecord, StoredRecord, UserRecord
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess, eventually
from tests.deadlines import EVENT, deadline
from tests.test_reliability.conftest import (
    BOT_TOKEN,
    LLM_KEY,
    GatedModel,
    orphaned_tool_calls,
    path_of,
)

pytestmark = pytest.mark.slow

DANA = {"id": 5001, "first_name": "Dana"}
EVE = {"id": 5002, "first_name": "Eve"}
SPAMMER = {"id": 6001, "first_name": "Spammer"}
GROUP = -100777
BURST_CHATS = [7000 + n for n in range(12)]
PART_ONE = ("Part one. " * 300).strip()
PART_TWO = ("Part two. " * 300).strip()


def respond(request: LLMRequest) -> LLMResponse:
    """What the model says, by the conversation it is sent."""
    last = request.messages[-1]
    if last.role == "tool":
        return LLMResponse(text="Deleted the spam.")
    current = last.content
    if "please delete m1" in current:
        call = ToolCall(id="call_del", name="delete_message", arguments='{"message_id": "m1"}')
        return LLMResponse(tool_calls=(call,))
    if "hello?" in current:
        return LLMResponse(text="Hello Dana!")
    if "tell me a lot" in current:
        return LLMResponse(text=PART_ONE + "\n\n" + PART_TWO)
    return LLMResponse(text="Noted.")


def user_texts(path: tuple[StoredRecord, ...]) -> list[str]:
    return [r.body.text for r in path if isinstance(r.body, UserRecord)]


async def kinds(db: SqlStore, chat_id: int) -> list[str]:
    return [r.kind for r in await path_of(db, chat_id)]


async def test_a_crash_mid_turn_loses_and_doubles_nothing_and_every_turn_ends_clearly(
    bot: BotProcess, api: FakeBotApi, llm: FakeOpenAIServer, db: SqlStore
) -> None:
    model = GatedModel(respond, hold=lambda r: "hello?" in r.messages[-1].content)
    llm.model = model
    await bot.start()

    # C: the second bubble of a long reply hangs
    api.delay_next("sendMessage", 60, after=1)
    api.push_update(api.user_message(EVE["id"], EVE, "tell me a lot", chat_type="private"))
    await api.wait_for_call("sendMessage", 2, timeout=deadline(EVENT))
    first_bubble = api.sent_messages(EVE["id"])[0]["message_id"]
    # B: the tool's Bot API call hangs
    api.delay_next("deleteMessage", 60)
    api.set_admins(GROUP, {DANA["id"]})  # only an admin may have a member's message deleted
    api.push_update(api.user_message(GROUP, SPAMMER, "buy coins"))
    api.push_update(api.user_message(GROUP, DANA, "@test_bot please delete m1"))
    await api.wait_for_call("deleteMessage", 1, timeout=deadline(EVENT))
    # A: the model call is in flight
    api.push_update(api.user_message(DANA["id"], DANA, "hello?", chat_type="private"))
    await model.held.wait()
    # D: a burst is being taken in
    for round_ in range(3):
        for chat in BURST_CHATS:
            api.push_update(api.user_message(chat, chat, f"note {round_}", chat_type="private"))
    await api.wait_for_call("sendMessage", 4, timeout=deadline(EVENT))
    # what was confirmed is stored already
    assert user_texts(await path_of(db, DANA["id"])) == ["hello?"]
    cut = (await path_of(db, EVE["id"]))[-1]
    assert cut.message_ids == (first_bubble, None)

    bot.kill()
    model.gate.set()  # the held call now answers a dead process
    await bot.start()

    async def settled() -> bool:
        burst = [user_texts(await path_of(db, chat)) for chat in BURST_CHATS]
        return (
            await kinds(db, DANA["id"]) == ["user", "assistant"]
            and await kinds(db, GROUP) == ["user", "user", "assistant", "tool_results", "assistant"]
            and None not in (await path_of(db, EVE["id"]))[-1].message_ids
            and all(len(texts) >= 3 for texts in burst)
        )

    await eventually(settled)
    await bot.stop()

    # A: answered after the restart, the message stored once (its update may come twice)
    assert [m["text"] for m in api.sent_messages(DANA["id"])] == ["Hello Dana!"]
    path = await path_of(db, DANA["id"])
    assert user_texts(path) == ["hello?"]
    assert path[-1].message_ids == (api.sent_messages(DANA["id"])[0]["message_id"],)
    inbound = await db.find_platform_message(DANA["id"], path[0].message_ids[0] or 0)
    assert inbound is not None
    assert inbound.record_id == path[0].id

    # B: the turn completed; no request ever held a tool call without its result
    assert [m["text"] for m in api.sent_messages(GROUP)] == ["Deleted the spam."]
    group_path = await path_of(db, GROUP)
    # the spam was deleted: its words are gone from storage (docs/context-window.md)
    assert user_texts(group_path) == ["", "@test_bot please delete m1"]
    assert isinstance(group_path[0].body, UserRecord)
    assert group_path[0].body.deleted
    for body in llm.requests:
        assert orphaned_tool_calls(body) == []

    # C: the confirmed bubble kept, the undelivered one never stored as said, the user told
    notice = api.sent_messages(EVE["id"])[-1]["text"]
    assert "restarted while replying" in notice
    assert "/retry" in notice
    path = await path_of(db, EVE["id"])
    assert [r.kind for r in path] == ["user", "assistant"]
    reply = path[-1]
    assert isinstance(reply.body, AssistantRecord)
    assert (reply.message_ids, reply.body.text) == ((first_bubble,), PART_ONE)
    bubble = await db.find_platform_message(EVE["id"], first_bubble)
    assert bubble is not None
    assert (bubble.record_id, bubble.is_bot) == (reply.id, True)

    # D: every message of the burst stored exactly once, in order
    for chat in BURST_CHATS:
        assert user_texts(await path_of(db, chat)) == ["note 0", "note 1", "note 2"]

    # no secret in anything the process logged
    log = bot.log()
    assert "Traceback" not in log
    for secret in (BOT_TOKEN, BOT_TOKEN.split(":", 1)[1], LLM_KEY):
        assert secret not in log

    # and the cut conversation goes on with only what the user saw
    await bot.start()
    api.push_update(api.user_message(EVE["id"], EVE, "thanks", chat_type="private"))
    await eventually(lambda: _answered(db, EVE["id"], 2))
    shown = "\n".join(m.content for m in model.requests[-1].messages)
    assert "Part one." in shown
    assert "Part two." not in shown
    assert await bot.stop() == 0


async def _answered(db: SqlStore, chat_id: int, replies: int) -> bool:
    return (await kinds(db, chat_id)).count("assistant") >= replies
