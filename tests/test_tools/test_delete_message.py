"""The delete_message tool acts with the rights of the member who asked."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.domain.platform_messages import PlatformMessage
from bot.errors import TelegramBadRequest, TelegramNetworkError, ToolError
from bot.tools.base import ToolContext
from bot.tools.delete_message import delete_message
from bot.tools.rights import ChatAdmins, MemberRights
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock

GROUP = -100500
BOT = 999
OWNER = 42
ALICE, BOB, DANA = 1001, 1002, 1004
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def chat_with(store: InMemoryStore, chat_id: int) -> None:
    """m10 by Alice, m11 by Bob, m12 by the bot; 13 is not known."""
    await store.record_platform_messages(
        [
            PlatformMessage(chat_id=chat_id, message_id=mid, sender_id=sender, date=AT)
            for mid, sender in ((10, ALICE), (11, BOB), (12, BOT))
        ]
    )


def context(
    messenger: RecordingMessenger,
    store: InMemoryStore,
    requester: int | None,
    *,
    chat_id: int = GROUP,
    admins: ChatAdmins | None = None,
    clock: SteppingClock | None = None,
) -> ToolContext:
    clock = clock or SteppingClock(AT)
    rights = MemberRights(
        requester_id=requester,
        owner_id=OWNER,
        bot_id=BOT,
        admins=admins or ChatAdmins(messenger=messenger, clock=clock),
    )
    return ToolContext(
        chat_id=chat_id,
        thread_id=0,
        bot_id=BOT,
        clock=clock,
        messenger=messenger,
        platform_messages=store,
        rights=rights,
    )


@pytest.mark.parametrize(
    ("requester", "message_id", "allowed"),
    [
        (BOB, 11, True),
        (BOB, 12, True),
        (BOB, 10, False),
        (BOB, 13, False),
        (None, 12, True),
        (None, 11, False),
        (DANA, 10, True),
        (DANA, 13, True),
        (OWNER, 10, True),
    ],
    ids=[
        "own message",
        "the bot's message",
        "another member's",
        "unknown author",
        "no requester, the bot's",
        "no requester, a member's",
        "admin, another member's",
        "admin, unknown author",
        "owner, another member's",
    ],
)
async def test_who_may_delete_what(
    messenger: RecordingMessenger, requester: int | None, message_id: int, allowed: bool
) -> None:
    store = InMemoryStore()
    await chat_with(store, GROUP)
    messenger.admins[GROUP] = {DANA}
    ctx = context(messenger, store, requester)
    if allowed:
        await delete_message({"message_id": message_id}, ctx)
        assert messenger.deleted == [(GROUP, message_id)]
    else:
        with pytest.raises(ToolError, match=r"^not allowed: ") as refused:
            await delete_message({"message_id": message_id}, ctx)
        assert refused.value.code == "not_allowed"
        assert messenger.deleted == []


async def test_admin_answers_are_cached_for_a_minute(messenger: RecordingMessenger) -> None:
    store = InMemoryStore()
    await chat_with(store, GROUP)
    messenger.admins[GROUP] = {DANA}
    clock = SteppingClock(AT)
    admins = ChatAdmins(messenger=messenger, clock=clock)
    for message_id in (10, 11):
        clock.advance(25)
        await delete_message(
            {"message_id": message_id},
            context(messenger, store, DANA, admins=admins, clock=clock),
        )
    assert messenger.admin_checks == [(GROUP, DANA)]
    messenger.admins[GROUP] = set()  # Dana is no longer an admin; the cache expires
    clock.advance(61)
    with pytest.raises(ToolError, match=r"^not allowed: "):
        await delete_message({"message_id": 10}, context(messenger, store, DANA, admins=admins))
    assert messenger.admin_checks == [(GROUP, DANA)] * 2


async def test_the_owner_and_private_chats_never_ask_telegram(
    messenger: RecordingMessenger,
) -> None:
    store = InMemoryStore()
    await chat_with(store, GROUP)
    await chat_with(store, BOB)
    await delete_message({"message_id": 10}, context(messenger, store, OWNER))
    with pytest.raises(ToolError, match=r"^not allowed: "):
        await delete_message({"message_id": 10}, context(messenger, store, BOB, chat_id=BOB))
    assert messenger.admin_checks == []


class TelegramDown(RecordingMessenger):
    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        raise TelegramNetworkError("timeout")


async def test_a_failed_rights_question_refuses() -> None:
    store = InMemoryStore()
    await chat_with(store, GROUP)
    messenger = TelegramDown()
    with pytest.raises(ToolError, match="could not ask Telegram"):
        await delete_message({"message_id": 10}, context(messenger, store, BOB))
    assert messenger.deleted == []


class GoneMessenger(RecordingMessenger):
    """Telegram says the message was deleted before the bot got to it."""

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        raise TelegramBadRequest("Telegram server says - Bad Request: message to delete not found")


async def test_a_deletion_forgets_the_message_and_so_does_telegrams_report() -> None:
    store = InMemoryStore()
    await store.record_platform_messages(
        [PlatformMessage(chat_id=GROUP, message_id=11, sender_id=BOB, date=AT, text="pin 5519")]
    )
    messenger = RecordingMessenger()
    ctx = replace(context(messenger, store, BOB), eraser=store)
    await delete_message({"message_id": 11}, ctx)
    found = await store.find_platform_message(GROUP, 11)
    assert found is not None
    assert found.text == ""
    assert ctx.erased == {11}

    await store.record_platform_messages(
        [PlatformMessage(chat_id=GROUP, message_id=12, sender_id=BOB, date=AT, text="pin 7777")]
    )
    gone = replace(context(GoneMessenger(), store, BOB), eraser=store)
    with pytest.raises(TelegramBadRequest):
        await delete_message({"message_id": 12}, gone)
    found = await store.find_platform_message(GROUP, 12)
    assert found is not None
    assert found.text == ""
    assert await store.search_messages(GROUP, 0, "pin", limit=5) == ()
