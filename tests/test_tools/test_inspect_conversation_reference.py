"""inspect_conversation_reference: a quoted message in full, and up to two of its targets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.facts import Media
from bot.domain.platform_messages import PlatformMessage
from bot.errors import ToolError
from bot.tools.base import ToolContext
from bot.tools.inspect_conversation_reference import (
    MAX_CHARS,
    TOOL,
    inspect_conversation_reference,
)
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock

GROUP = -100500
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def message(
    mid: int,
    text: str,
    reply_to: int | None = None,
    *,
    chat_id: int = GROUP,
    media: tuple[Media, ...] = (),
) -> PlatformMessage:
    return PlatformMessage(
        chat_id=chat_id,
        message_id=mid,
        sender_id=1000 + mid,
        sender_name=f"member {mid}",
        date=AT + timedelta(minutes=mid),
        text=text,
        media=media,
        reply_to_message_id=reply_to,
    )


async def context(*messages: PlatformMessage) -> ToolContext:
    store = InMemoryStore()
    await store.record_platform_messages(messages)
    return ToolContext(
        chat_id=GROUP,
        thread_id=0,
        bot_id=999,
        clock=SteppingClock(AT),
        messenger=RecordingMessenger(),
        platform_messages=store,
    )


async def entries(args: dict[str, object], ctx: ToolContext) -> list[dict[str, object]]:
    out = json.loads(await inspect_conversation_reference(args, ctx))
    assert isinstance(out["entries"], list)
    return out["entries"]


async def test_depth_zero_is_the_message_alone_with_its_facts() -> None:
    ctx = await context(
        message(1, "the plan"),
        message(2, "see this 📎", reply_to=1, media=(Media(kind="photo"),)),
    )

    [entry] = await entries({"reference": 2}, ctx)

    assert entry == {
        "message_id": 2,
        "sender_id": 1002,
        "sender": "member 2",
        "time": "2026-11-30T12:02+00:00",
        "text": "see this 📎",
        "truncated": False,
        "media": ["photo"],
        "reply_to": 1,
    }


async def test_depth_follows_the_reply_chain_and_stops_at_its_start() -> None:
    ctx = await context(message(1, "a"), message(2, "b", 1), message(3, "c", 2), message(4, "d", 3))

    assert [e["text"] for e in await entries({"reference": 4, "depth": 2}, ctx)] == ["d", "c", "b"]
    assert [e["text"] for e in await entries({"reference": 2, "depth": 2}, ctx)] == ["b", "a"]


async def test_a_reply_loop_is_shown_once() -> None:
    ctx = await context(message(1, "a", reply_to=2), message(2, "b", reply_to=1))

    assert [e["message_id"] for e in await entries({"reference": 1, "depth": 2}, ctx)] == [1, 2]


async def test_a_target_not_stored_ends_the_chain_quietly() -> None:
    ctx = await context(message(5, "answering a message from before the bot", reply_to=4))

    assert [e["message_id"] for e in await entries({"reference": 5, "depth": 1}, ctx)] == [5]


async def test_an_unknown_message_or_one_of_another_chat_is_not_found() -> None:
    ctx = await context(message(1, "elsewhere", chat_id=-1009))

    for reference in (1, 2):
        with pytest.raises(ToolError) as raised:
            await inspect_conversation_reference({"reference": reference}, ctx)
        assert raised.value.code == "not_found"


async def test_the_text_is_cut_at_the_budget_and_says_so() -> None:
    ctx = await context(message(1, "y" * 10), message(2, "x" * (MAX_CHARS + 5), reply_to=1))

    got = await entries({"reference": 2, "depth": 1}, ctx)

    assert len(got) == 1  # the budget is spent: the target is not read
    assert got[0]["text"] == "x" * MAX_CHARS
    assert got[0]["truncated"] is True


@pytest.mark.parametrize("depth", [-1, 3, True, "1", 1.0])
async def test_a_depth_outside_zero_to_two_is_refused(depth: object) -> None:
    ctx = await context(message(1, "a"))

    with pytest.raises(ToolError, match="depth") as raised:
        await inspect_conversation_reference({"reference": 1, "depth": depth}, ctx)
    assert raised.value.code == "bad_arguments"


async def test_a_reference_that_is_not_a_resolved_id_is_refused() -> None:
    ctx = await context(message(1, "a"))

    with pytest.raises(ToolError) as raised:
        await inspect_conversation_reference({"reference": "m1"}, ctx)
    assert raised.value.code == "bad_arguments"


def test_its_schema_bounds_the_depth() -> None:
    assert TOOL.spec.parameters["required"] == ["reference"]
    assert TOOL.spec.parameters["properties"]["depth"]["maximum"] == 2
