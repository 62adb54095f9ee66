"""The chat-event part of the store contract (closed chats, reactions) on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.ids import SessionKey
from bot.ports import StoredReaction
from tests.test_storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = -1001234567890123
OTHER = -1009999999999999


def reaction(
    emoji: str,
    at: datetime,
    *,
    chat: int = CHAT,
    thread: int = 0,
    message: int = 2**33 + 5,
    user: int = 7_000_000_001,
    name: str = "Alice",
) -> StoredReaction:
    return StoredReaction(
        chat_id=chat,
        thread_id=thread,
        message_id=message,
        user_id=user,
        user_name=name,
        emoji=emoji,
        created_at=at,
    )


async def test_closing_a_chat_closes_every_thread_and_reopening_opens_them(store: Store) -> None:
    main = await store.open_session(SessionKey(chat_id=CHAT), scene="group")
    topic = await store.open_session(SessionKey(chat_id=CHAT, thread_id=2**40), scene="group")
    other = await store.open_session(SessionKey(chat_id=OTHER), scene="group")
    assert not main.closed
    assert not await store.is_chat_closed(CHAT)

    assert await store.set_chat_closed(CHAT, True) == 2
    assert await store.set_chat_closed(CHAT, True) == 0  # already closed
    assert await store.is_chat_closed(CHAT)
    assert not await store.is_chat_closed(OTHER)
    found = await store.find_session(topic.key)
    assert found is not None
    assert found.closed
    # opening the session again (a message, a title change) does not reopen it
    reread = await store.open_session(main.key, scene="group", title="New title")
    assert reread.closed
    assert not (await store.find_session(other.key) or other).closed

    assert await store.set_chat_closed(CHAT, False) == 2
    assert not await store.is_chat_closed(CHAT)
    found = await store.find_session(main.key)
    assert found is not None
    assert not found.closed


async def test_closing_an_unknown_chat_changes_nothing(store: Store) -> None:
    assert await store.set_chat_closed(OTHER, True) == 0
    assert not await store.is_chat_closed(OTHER)


async def test_reactions_since_are_the_newest_of_the_thread_oldest_first(store: Store) -> None:
    await store.record_reactions(
        [
            reaction("👍", T0),
            reaction("🔥", T0 + timedelta(seconds=10), name="Bob", user=8),
            reaction("👎", T0 + timedelta(seconds=20)),
            reaction("👍", T0 + timedelta(seconds=30), thread=2**40),
            reaction("👍", T0 + timedelta(seconds=40), chat=OTHER),
        ]
    )
    everything = await store.reactions_since(CHAT, 0, None, limit=10)
    assert [r.emoji for r in everything] == ["👍", "🔥", "👎"]
    assert everything[1] == reaction("🔥", T0 + timedelta(seconds=10), name="Bob", user=8)

    after = await store.reactions_since(CHAT, 0, T0, limit=10)  # strictly after
    assert [r.emoji for r in after] == ["🔥", "👎"]
    newest = await store.reactions_since(CHAT, 0, None, limit=2)
    assert [r.emoji for r in newest] == ["🔥", "👎"]
    topic = await store.reactions_since(CHAT, 2**40, None, limit=10)
    assert [(r.emoji, r.thread_id) for r in topic] == [("👍", 2**40)]
    assert await store.reactions_since(CHAT, 0, T0 + timedelta(minutes=1), limit=10) == ()


async def test_reactions_between_is_half_open_across_chats(store: Store) -> None:
    day = timedelta(days=1)
    await store.record_reactions(
        [
            reaction("👍", T0 - day, message=2**33 + 1),  # one message a day: a member's
            reaction("👍", T0, message=2**33 + 2),  # 👍 on one message is one row
            reaction("👎", T0 + timedelta(hours=3), chat=OTHER),
            reaction("👍", T0 + day, message=2**33 + 3),
        ]
    )
    found = await store.reactions_between(T0, T0 + day)
    assert [(r.emoji, r.chat_id) for r in found] == [("👍", CHAT), ("👎", OTHER)]
    assert found[0].created_at == T0
    assert found[0].created_at.tzinfo is not None


async def test_retention_drops_old_reactions(store: Store) -> None:
    await store.record_reactions([reaction("👍", T0 - timedelta(days=40)), reaction("👎", T0)])
    await store.prune(T0 - timedelta(days=30))
    found = await store.reactions_between(T0 - timedelta(days=100), T0 + timedelta(days=1))
    assert [r.emoji for r in found] == ["👎"]
