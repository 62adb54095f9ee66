"""Telegram faults and odd delivery, through aiogram's real client against the fake Bot API:
duplicate and out-of-order updates, flood waits, a bot removed from a group, a reply target
that is gone, server errors. Nothing received is lost, nothing unsent is stored as sent."""

from __future__ import annotations

from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord, UserRecord
from testkit.fake_bot_api import FakeBotApi
from tests.test_reliability.conftest import LiveBot

GROUP = -100900
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}


async def stored(live: LiveBot, chat_id: int) -> list[tuple[str, str]]:
    session = await live.store.find_session(SessionKey(chat_id=chat_id))
    if session is None:
        return []
    path = await live.store.load_path(session.id)
    return [
        (r.kind, r.body.text)
        for r in path
        if isinstance(r.body, UserRecord | AssistantRecord) and r.body.text
    ]


async def test_the_same_message_delivered_twice_is_stored_and_answered_once(
    live: LiveBot, api: FakeBotApi
) -> None:
    update = api.user_message(ALICE["id"], ALICE, "hi there", chat_type="private")
    api.push_update(update)
    last = api.push_update(update)  # a redelivery: same message, new update id
    await live.handled(last)

    assert await stored(live, ALICE["id"]) == [
        ("user", "hi there"),
        ("assistant", "Noted: hi there"),
    ]
    assert len(api.sent_messages(ALICE["id"])) == 1


async def test_updates_of_one_chat_listed_out_of_order_are_stored_in_message_order(
    live: LiveBot, api: FakeBotApi
) -> None:
    first = api.user_message(GROUP, ALICE, "first")
    second = api.user_message(GROUP, BOB, "second")
    other = api.user_message(GROUP - 1, BOB, "elsewhere")
    edit = api.user_message(
        GROUP, ALICE, "first (edited)", message_id=first["message"]["message_id"], edit=True
    )
    # one getUpdates batch, listed: edit, second, other chat, first
    api.push_update(edit, update_id=104)
    api.push_update(second, update_id=102)
    api.push_update(other, update_id=103)
    api.push_update(first, update_id=101)
    await live.handled(104)

    assert await stored(live, GROUP) == [("user", "first"), ("user", "second")]
    event = await live.store.find_platform_message(GROUP, first["message"]["message_id"])
    assert event is not None
    assert event.text == "first (edited)"  # the edit was applied after its message
    assert await stored(live, GROUP - 1) == [("user", "elsewhere")]


async def test_a_flood_wait_is_waited_out_and_the_reply_arrives_once(
    live: LiveBot, api: FakeBotApi
) -> None:
    api.fail_next("sendMessage", error_code=429, description="Too Many Requests: retry after 3",
                  retry_after=3)  # fmt: skip
    last = api.push_update(api.user_message(ALICE["id"], ALICE, "hello", chat_type="private"))
    await live.handled(last)

    assert live.slept == [3.0]
    assert [m["text"] for m in api.sent_messages(ALICE["id"])] == ["Noted: hello"]
    assert await stored(live, ALICE["id"]) == [("user", "hello"), ("assistant", "Noted: hello")]


async def test_a_bot_removed_from_the_group_stores_what_it_received_and_nothing_as_sent(
    live: LiveBot, api: FakeBotApi
) -> None:
    api.fail_next("sendMessage", error_code=403,
                  description="Forbidden: bot was kicked from the supergroup chat")  # fmt: skip
    last = api.push_update(api.user_message(GROUP, ALICE, "@test_bot are you there?"))
    await live.handled(last)

    assert await stored(live, GROUP) == [("user", "@test_bot are you there?")]
    assert api.sent_messages(GROUP) == []
    # back in the group: the next message is answered as usual
    last = api.push_update(api.user_message(GROUP, ALICE, "@test_bot now?"))
    await live.handled(last)
    assert [m["text"] for m in api.sent_messages(GROUP)] == ["Noted: @test_bot now?"]


async def test_a_multi_bubble_reply_cut_by_an_error_keeps_only_what_was_delivered(
    live: LiveBot, api: FakeBotApi
) -> None:
    one, two = ("Alpha. " * 500).strip(), ("Beta. " * 500).strip()
    from adapters.llm.scripted import Reply

    live.model.add(Reply(one + "\n\n" + two))
    api.fail_next("sendMessage", error_code=400, after=1,
                  description="Bad Request: message to be replied not found")  # fmt: skip
    last = api.push_update(api.user_message(ALICE["id"], ALICE, "long please", chat_type="private"))
    await live.handled(last)

    delivered = api.sent_messages(ALICE["id"])
    assert [m["text"] for m in delivered] == [one]
    assert await stored(live, ALICE["id"]) == [("user", "long please"), ("assistant", one)]
    bubble = await live.store.find_platform_message(ALICE["id"], delivered[0]["message_id"])
    assert bubble is not None
    assert bubble.is_bot
    assert bubble.record_id is not None


async def test_server_errors_and_network_trouble_do_not_stop_polling_or_lose_updates(
    live: LiveBot, api: FakeBotApi
) -> None:
    api.fail_next("getUpdates", error_code=502, description="Bad Gateway", times=2)
    api.fail_next("sendMessage", error_code=502, description="Bad Gateway")
    last = api.push_update(api.user_message(BOB["id"], BOB, "one", chat_type="private"))
    last = api.push_update(api.user_message(BOB["id"], BOB, "two", chat_type="private"))
    await live.handled(last)

    texts = await stored(live, BOB["id"])
    assert [t for t in texts if t[0] == "user"] == [("user", "one"), ("user", "two")]
    # the reply whose send failed is not stored as said; the other one is
    assert [m["text"] for m in api.sent_messages(BOB["id"])] == [
        t for k, t in texts if k == "assistant"
    ]


async def test_a_tool_whose_telegram_call_fails_returns_an_error_to_the_model(
    live: LiveBot, api: FakeBotApi
) -> None:
    from adapters.llm.scripted import CallTool, Reply

    live.model.add(CallTool("delete_message", {"message_id": "m1"}), Reply("Could not."))
    first = api.push_update(api.user_message(GROUP, BOB, "spam"))
    api.set_admins(GROUP, {ALICE["id"]})  # she may have Bob's message deleted
    api.fail_next("deleteMessage", error_code=400,
                  description="Bad Request: message can't be deleted")  # fmt: skip
    last = api.push_update(api.user_message(GROUP, ALICE, "@test_bot delete m1"))
    assert last > first
    await live.handled(last)

    result = live.model.requests[-1].messages[-1]
    assert result.role == "tool"
    assert result.content.startswith("error[telegram]")
    assert "can't be deleted" in result.content
    assert [m["text"] for m in api.sent_messages(GROUP)] == ["Could not."]
