"""remember and forget act with the rights of the member who asked, in the turn's chat only;
every refusal and every bad input is a `ToolError` the model reads, and nothing is kept."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import UTC, datetime

import pytest

from bot.context.memory_block import CHAT_WIDE, MemoryLimits
from bot.domain.messages import ToolCall
from bot.domain.records import ToolResult
from bot.errors import ToolError
from bot.tools.base import ToolContext
from bot.tools.forget import forget
from bot.tools.remember import remember, stored_call
from bot.tools.rights import ChatAdmins, MemberRights
from testkit.memory_facts import InMemoryMemoryFacts
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock

GROUP = -100500
BOT = 999
OWNER = 42
ALICE, BOB = 1001, 1002
AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def context(
    facts: InMemoryMemoryFacts,
    requester: int | None,
    *,
    chat_id: int = GROUP,
    admins: Collection[int] = (),
    limits: MemoryLimits | None = None,
) -> ToolContext:
    messenger = RecordingMessenger(admins={GROUP: set(admins)})
    clock = SteppingClock(AT)
    return ToolContext(
        chat_id=chat_id,
        thread_id=0,
        bot_id=BOT,
        clock=clock,
        messenger=messenger,
        platform_messages=InMemoryStore(),
        rights=MemberRights(
            requester_id=requester,
            owner_id=OWNER,
            bot_id=BOT,
            admins=ChatAdmins(messenger=messenger, clock=clock),
        ),
        memory=facts,
        memory_limits=limits or MemoryLimits(),
    )


@pytest.mark.parametrize(
    ("requester", "chat_id", "admins", "allowed"),
    [
        (BOB, GROUP, set(), False),
        (ALICE, GROUP, {ALICE}, True),
        (OWNER, GROUP, set(), True),
        (ALICE, ALICE, set(), True),  # the member's own private chat
        (None, GROUP, set(), False),
    ],
    ids=["member", "admin", "owner", "own-private-chat", "no-member"],
)
async def test_who_may_keep_a_fact_about_the_chat(
    requester: int | None, chat_id: int, admins: set[int], allowed: bool
) -> None:
    facts = InMemoryMemoryFacts()
    ctx = context(facts, requester, chat_id=chat_id, admins=admins)
    args = {"fact": "stand-up at 10", "about": "chat"}
    if allowed:
        assert json.loads(await remember(args, ctx))["about"] == "chat"
        (kept,) = await facts.list_facts(limit=10)
        assert (kept.chat_id, kept.member_id, kept.author_id) == (chat_id, CHAT_WIDE, requester)
    else:
        with pytest.raises(ToolError) as refused:
            await remember(args, ctx)
        assert refused.value.code == "not_allowed"
        assert await facts.list_facts(limit=10) == ()


async def test_a_fact_about_me_is_keyed_by_this_chat_and_the_member_who_asked() -> None:
    facts = InMemoryMemoryFacts()
    await remember({"fact": "  likes   jazz "}, context(facts, BOB))
    (kept,) = await facts.list_facts(limit=10)
    assert (kept.chat_id, kept.member_id, kept.text) == (GROUP, BOB, "likes jazz")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({}, "bad_arguments"),
        ({"fact": ""}, "bad_arguments"),
        ({"fact": 12}, "bad_arguments"),
        ({"fact": "x" * 301}, "too_long"),
        ({"fact": "Alice is 40", "about": "Alice"}, "bad_arguments"),
        ({"fact": "Alice is 40", "about": 1001}, "bad_arguments"),
    ],
    ids=["missing", "empty", "not-text", "too-long", "about-someone", "about-an-id"],
)
async def test_bad_input_is_a_clear_error_and_keeps_nothing(
    args: dict[str, object], code: str
) -> None:
    facts = InMemoryMemoryFacts()
    with pytest.raises(ToolError) as refused:
        await remember(args, context(facts, BOB))
    assert refused.value.code == code
    assert await facts.list_facts(limit=10) == ()


async def test_the_caps_are_errors_the_model_reads() -> None:
    facts = InMemoryMemoryFacts()
    ctx = context(facts, OWNER, limits=MemoryLimits(per_member=1, per_chat=2))
    await remember({"fact": "one"}, ctx)
    with pytest.raises(ToolError, match="already has 1 facts") as member_full:
        await remember({"fact": "two"}, ctx)
    assert member_full.value.code == "memory_full"
    await remember({"fact": "chat one", "about": "chat"}, ctx)
    with pytest.raises(ToolError, match="already keeps 2 facts"):
        await remember({"fact": "chat two", "about": "chat"}, ctx)


@pytest.mark.parametrize(
    ("requester", "target", "admins", "allowed"),
    [
        (BOB, "bob", set(), True),
        (BOB, "alice", set(), False),
        (BOB, "chat", set(), False),
        (ALICE, "chat", {ALICE}, True),
        (ALICE, "bob", {ALICE}, False),  # an admin does not own a member's facts
        (OWNER, "bob", set(), True),
    ],
    ids=["own", "another-members", "chat-by-member", "chat-by-admin", "admin-others", "owner"],
)
async def test_who_may_forget_what(
    requester: int, target: str, admins: set[int], allowed: bool
) -> None:
    facts = InMemoryMemoryFacts()
    ids = {}
    for name, member in (("bob", BOB), ("alice", ALICE), ("chat", CHAT_WIDE)):
        kept = await facts.add_fact(
            chat_id=GROUP,
            member_id=member,
            author_id=member or OWNER,
            text=name,
            created_at=AT,
            per_member=9,
            per_chat=9,
        )
        assert not isinstance(kept, str)
        ids[name] = kept.alias
    ctx = context(facts, requester, admins=admins)
    if allowed:
        assert json.loads(await forget({"memory": ids[target]}, ctx)) == {"forgotten": ids[target]}
        assert ctx.forgotten == {int(ids[target][1:])}
    else:
        with pytest.raises(ToolError) as refused:
            await forget({"memory": ids[target]}, ctx)
        assert refused.value.code == "not_allowed"
        assert len(await facts.list_facts(limit=10)) == 3


async def test_a_fact_of_another_chat_is_unknown_here() -> None:
    facts = InMemoryMemoryFacts()
    await remember({"fact": "private"}, context(facts, OWNER, chat_id=OWNER))
    with pytest.raises(ToolError) as unknown:
        await forget({"memory": "f1"}, context(facts, OWNER))
    assert unknown.value.code == "unknown_memory"
    assert len(await facts.list_facts(limit=10)) == 1


def test_the_stored_call_keeps_the_id_not_the_text() -> None:
    call = ToolCall(id="c1", name="remember", arguments='{"fact": "SECRET", "about": "me"}')
    kept = ToolResult(call_id="c1", name="remember", content='{"remembered": "f9", "about": "me"}')
    stored = stored_call(call, kept)
    assert "SECRET" not in stored.arguments
    assert json.loads(stored.arguments) == {"fact": "[kept as f9]", "about": "me"}
    refused = ToolResult(call_id="c1", name="remember", content="too long", is_error=True)
    assert stored_call(call, refused) == call
