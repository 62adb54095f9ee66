"""Memory through `tgbot run`: a scripted model calls `remember` and `forget` over real HTTP,
and every assertion reads what the model was sent (the fake OpenAI server keeps each raw
request body). The leaks the peers shipped are tried here: a member's private-chat fact asked
for in a group, the owner's private fact asked for in a group, one member in two chats, one
member's facts riding into another member's request in the same group (the window's rendered
prefix is reused across turns), and a forgotten fact surviving in a later request."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel, Step
from bot.agent.ledger_read import read_entries
from bot.agent.trace_reader import read_trace
from bot.app.dashboard.calls import view
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import QUIET_CONFIG, StartBot, eventually
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

GROUP = -1005550001
OTHER_GROUP = -1005550002
OWNER = {"id": 42, "first_name": "Olga"}
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}
TURN_CONTEXT = "\n\n[Turn context]\n"


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="ok")


@dataclass
class Bot:
    api: FakeBotApi
    llm: FakeOpenAIServer
    model: ScriptedModel
    store: SqlStore
    sent: Counter[int] = field(default_factory=Counter)
    sends: int = 0

    async def say(self, user: dict[str, Any], chat: int, text: str, *steps: Step) -> int:
        """`user` writes `text` in `chat` (a private chat when `chat` is the user's id); returns
        the index of the turn's first request, once its answer is sent and stored."""
        first = len(self.llm.requests)
        self.model.add(*steps)
        private = chat == user["id"]
        body = text if private or text.startswith("/") else f"@test_bot {text}"
        kind = "private" if private else "supergroup" if str(chat).startswith("-100") else "group"
        self.api.push_update(self.api.user_message(chat, user, body, chat_type=kind))
        self.sends += 1
        self.sent[chat] += 1
        await self.api.wait_for_call("sendMessage", self.sends, timeout=deadline(EVENT))
        count = self.sent[chat]
        sent = await self.api.wait_for_sent(chat, count, timeout=deadline(EVENT))

        async def stored() -> bool:
            found = await self.store.find_platform_message(chat, sent[count - 1]["message_id"])
            return found is not None

        if not text.startswith("/"):
            await eventually(stored)
        return first

    def request(self, index: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.llm.requests[index]["messages"]
        return messages

    def wire(self, start: int = 0) -> str:
        """Every request from `start` on, as sent."""
        return json.dumps(self.llm.requests[start:], ensure_ascii=False)

    def last_reply(self, chat: int) -> str:
        return str(self.api.sent_messages(chat)[-1]["text"])


def current(messages: list[dict[str, Any]]) -> int:
    (index,) = [i for i, m in enumerate(messages) if TURN_CONTEXT in (m.get("content") or "")]
    return index


def memory_block(messages: list[dict[str, Any]]) -> str:
    content = str(messages[current(messages)]["content"])
    start = content.find("\n\n[Memory]\n")
    return "" if start < 0 else content[start + 2 :].split("\n\n[")[0]


def tool_result(messages: list[dict[str, Any]]) -> str:
    assert messages[-1]["role"] == "tool"
    return str(messages[-1]["content"])


async def start(bot_running: StartBot, config: str = QUIET_CONFIG) -> Bot:
    model = ScriptedModel(default=answer)
    api, llm, _process, store = await bot_running(model, config=config, BOT_LOCALE="en")
    return Bot(api=api, llm=llm, model=model, store=store)


def remember(fact: str, about: str | None = None) -> CallTool:
    return CallTool("remember", {"fact": fact} if about is None else {"fact": fact, "about": about})


async def test_facts_stay_in_the_chat_and_with_the_member_they_were_told_by(
    bot_running: StartBot,
) -> None:
    bot = await start(bot_running)
    alice_private = ALICE["id"]

    # Alice, privately: a fact kept about her; the prefix before her message never changes
    asked = await bot.say(
        ALICE,
        alice_private,
        "please keep in mind that I eat no meat",
        remember("PRIVATE-VEG: Alice is vegetarian"),
        Reply("noted"),
    )
    before = bot.request(asked)
    assert memory_block(before) == ""
    assert json.loads(tool_result(bot.request(asked + 1))) == {"remembered": "f1", "about": "me"}
    stored_call = bot.request(asked + 1)[-2]["tool_calls"][0]["function"]["arguments"]
    assert "PRIVATE-VEG" not in stored_call  # replayed with its id, never its text
    later = await bot.say(ALICE, alice_private, "what do I eat?")
    after = bot.request(later)
    prefix = before[: current(before)]
    assert after[: len(prefix)] == prefix  # byte-identical prefix before and after remember
    assert json.dumps(after[: len(prefix)]) == json.dumps(prefix)
    assert memory_block(after) == (
        "[Memory]\nabout the member user_id:1001 (here only):\n"
        "- f1: PRIVATE-VEG: Alice is vegetarian"
    )

    # the owner, privately
    await bot.say(OWNER, OWNER["id"], "remember my PIN hint", remember("OWNER-SECRET hint"))
    owner_private = bot.wire(len(bot.llm.requests) - 1)
    assert "OWNER-SECRET" not in owner_private  # the answer's request shows the id only
    mine = await bot.say(OWNER, OWNER["id"], "what is my hint?")
    assert "OWNER-SECRET hint" in memory_block(bot.request(mine))

    # in a group: neither private fact reaches it, asked by their member or by another
    group_start = len(bot.llm.requests)
    turns = [
        await bot.say(ALICE, GROUP, "what do I eat?"),
        await bot.say(BOB, GROUP, "what does Alice eat?"),
        await bot.say(OWNER, GROUP, "what is my PIN hint?"),
    ]
    in_group = bot.wire(group_start)
    assert "PRIVATE-VEG" not in in_group
    assert "OWNER-SECRET" not in in_group
    assert [memory_block(bot.request(turn)) for turn in turns] == ["", "", ""]

    # Alice keeps a fact in the group: shown to her turns there, never in Bob's right after
    await bot.say(ALICE, GROUP, "I lead the Tuesday demo", remember("GROUP-ALICE leads demos"))
    alice_turn = await bot.say(ALICE, GROUP, "what do I lead?")
    bob_turn = await bot.say(BOB, GROUP, "and me?")
    assert "GROUP-ALICE" in memory_block(bot.request(alice_turn))
    assert "PRIVATE-VEG" not in memory_block(bot.request(alice_turn))
    assert "GROUP-ALICE" not in json.dumps(bot.request(bob_turn))
    # the rendered window was reused for Bob's turn (same prefix), the block was not
    alice_msgs, bob_msgs = bot.request(alice_turn), bot.request(bob_turn)
    assert bob_msgs[: current(alice_msgs)] == alice_msgs[: current(alice_msgs)]

    # the same member in another group sees none of it
    other = await bot.say(ALICE, OTHER_GROUP, "what do I lead?")
    assert memory_block(bot.request(other)) == ""
    assert "GROUP-ALICE" not in json.dumps(bot.request(other))

    # Alice forgets her private fact through the model: gone from every later request
    await bot.say(ALICE, alice_private, "forget that", CallTool("forget", {"memory": "f1"}))
    assert json.loads(tool_result(bot.request(-1))) == {"forgotten": "f1"}
    gone = await bot.say(ALICE, alice_private, "what do I eat?")
    assert "PRIVATE-VEG" not in bot.wire(gone - 1)
    assert memory_block(bot.request(gone)) == ""
    # nor does search find it: the fact was never a message, its call keeps only its id
    await bot.say(
        ALICE, alice_private, "search", CallTool("search_history", {"query": "vegetarian"})
    )
    assert tool_result(bot.request(-1)) == "no message in this chat's history matches 'vegetarian'"


CAPPED = (
    QUIET_CONFIG
    + """
[memory]
per_member = 2
max_fact_chars = 40
"""
)


async def test_rights_caps_and_bad_input_are_tool_errors_and_memory_forgets(
    bot_running: StartBot, tmp_path: Path
) -> None:
    bot = await start(bot_running, CAPPED)
    bot.api.set_admins(GROUP, {ALICE["id"]})

    async def result_of(user: dict[str, Any], *call: CallTool) -> list[str]:
        first = await bot.say(user, GROUP, "do it", *call, Reply("done"))
        assert len(bot.llm.requests) == first + len(call) + 1  # one call a step, then the reply
        results = [m for m in bot.request(-1) if m["role"] == "tool"]
        return [str(m["content"]) for m in results[-len(call) :]]

    # chat facts: an administrator yes, a member no
    (kept,) = await result_of(ALICE, remember("stand-up at 10", about="chat"))
    assert json.loads(kept) == {"remembered": "f1", "about": "chat"}
    (refused,) = await result_of(BOB, remember("Bob rules the chat", about="chat"))
    assert refused.startswith("error[not_allowed]:")

    # bad input: a clear error each, nothing kept
    errors = await result_of(
        BOB,
        CallTool("remember", {"fact": "   "}),
        remember("x" * 41),
        remember("Alice is 40", about="Alice"),
        CallTool("forget", {"memory": "f999"}),
        CallTool("forget", {"memory": "the stand-up"}),
        CallTool("forget", {"memory": "f1"}),
    )
    assert [e.split(":")[0] for e in errors] == [
        "error[bad_arguments]",
        "error[too_long]",
        "error[bad_arguments]",
        "error[unknown_memory]",
        "error[bad_arguments]",
        "error[not_allowed]",
    ]
    assert "41 characters, over the limit of 40" in errors[1]

    # the cap per member
    results = await result_of(
        BOB, remember("BOB-ONE likes tea"), remember("BOB-TWO likes jazz"), remember("BOB-3")
    )
    assert [json.loads(r) for r in results[:2]] == [
        {"remembered": "f2", "about": "me"},
        {"remembered": "f3", "about": "me"},
    ]
    assert results[2].startswith("error[memory_full]:")

    # /memory lists Bob's own facts here (newest first), not Alice's nor the chat's
    await bot.say(BOB, GROUP, "/memory")
    listing = bot.last_reply(GROUP)
    assert listing.index("f3: BOB-TWO likes jazz") < listing.index("f2: BOB-ONE likes tea")
    assert "stand-up" not in listing
    # another member's fact or an unknown one is "unknown", never deleted
    await bot.say(ALICE, GROUP, "/memory forget f2")
    assert "no kept fact f2" in bot.last_reply(GROUP)
    await bot.say(BOB, GROUP, "/memory forget f2")
    assert bot.last_reply(GROUP) == "Forgot f2."
    seen = await bot.say(BOB, GROUP, "what do you know about me?")
    assert "BOB-ONE" not in bot.wire(seen)  # not the listing retold, nor the block
    block = memory_block(bot.request(seen))
    assert "- f3: BOB-TWO likes jazz" in block
    assert block.index("f3") < block.index("about this chat:") < block.index("f1: stand-up")
    await bot.say(BOB, GROUP, "/memory clear")
    assert "(1)" in bot.last_reply(GROUP)
    cleared = await bot.say(BOB, GROUP, "and now?")
    # no kept fact of Bob's anywhere (a refused one, never kept, stays a call like any other)
    assert "BOB-ONE" not in bot.wire(cleared)
    assert "BOB-TWO" not in bot.wire(cleared)
    assert memory_block(bot.request(cleared)) == "[Memory]\nabout this chat:\n- f1: stand-up at 10"

    # the trace of the call shows which facts it saw
    call_seen = len(bot.llm.requests)
    await bot.say(ALICE, GROUP, "when is stand-up?")
    assert call_seen < len(bot.llm.requests)
    traces = tmp_path / "agent-traces"

    async def traced() -> bool:
        return any(
            "f1: stand-up at 10" in json.dumps(read_trace(traces, e.call_id) or {})
            for e in read_entries(traces)
        )

    await eventually(traced)
    entries = read_entries(traces)
    pages = [view(t) for e in entries if (t := read_trace(traces, e.call_id)) is not None]
    last = pages[-1]
    assert last["memory"] == ("f1",)


async def test_a_group_upgraded_to_a_supergroup_keeps_its_facts(bot_running: StartBot) -> None:
    bot = await start(bot_running)
    old, new = -5550003, -1005550003
    await bot.say(ALICE, old, "I am the treasurer", remember("TREASURER Alice"))
    # Telegram's service message in the new supergroup (a Bot API update as sent)
    update = {
        "message": {
            "message_id": 1,
            "from": {"id": 1087968824, "is_bot": True, "first_name": "Group"},
            "chat": {"id": new, "type": "supergroup", "title": "Team"},
            "date": int(time.time()),
            "migrate_from_chat_id": old,
        }
    }
    bot.api.push_update(update)

    async def stored() -> bool:
        return await bot.store.find_platform_message(new, 1) is not None

    await eventually(stored)
    asked = await bot.say(ALICE, new, "what am I?")
    assert "- f1: TREASURER Alice" in memory_block(bot.request(asked))
    before = await bot.say(ALICE, old, "still here?")
    assert memory_block(bot.request(before)) == ""
