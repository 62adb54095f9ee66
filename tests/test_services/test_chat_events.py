"""`ChatEventService` and `ClosedChatGuard` over the in-memory store: which membership
changes open or close a chat, which reactions are kept, and what a closed chat is sent."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.domain.facts import MembershipChange, MembershipChangeKind, ReactionChange, Sender
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.services.chat_events import ChatEventPolicy, ChatEventService
from bot.services.messenger_relay import ChatClosed, ClosedChatGuard, ClosedChats
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BOT = 999
OWNER = 4242
GROUP = -100
ALICE = Sender(id=1001, name="Alice")


def membership(
    change: MembershipChangeKind, *, chat: int = GROUP, status: str = "member"
) -> MembershipChange:
    return MembershipChange(
        chat_id=chat,
        chat_type="private" if chat > 0 else "supergroup",
        chat_title=None if chat > 0 else "Team",
        date=NOW,
        actor=ALICE,
        change=change,
        status=status,
    )


def reacted(
    message_id: int,
    *,
    added: tuple[str, ...] = ("👍",),
    removed: tuple[str, ...] = (),
    actor: Sender = ALICE,
) -> ReactionChange:
    return ReactionChange(
        chat_id=GROUP, message_id=message_id, date=NOW, actor=actor, added=added, removed=removed
    )


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def service(store: InMemoryStore) -> ChatEventService:
    return ChatEventService(
        sessions=store,
        platform_messages=store,
        events=store,
        policy=ChatEventPolicy(owner_id=OWNER, bot_id=BOT, allowed_chats=(GROUP, OWNER, 77)),
        clock=SteppingClock(NOW),
    )


async def test_added_opens_removed_closes_promoted_changes_nothing(
    store: InMemoryStore, service: ChatEventService
) -> None:
    await service.on_membership(membership("added"))
    session = await store.find_session(SessionKey(chat_id=GROUP))
    assert session is not None
    assert (session.scene, session.title, session.closed) == ("group", "Team", False)

    await service.on_membership(membership("updated", status="administrator"))
    assert not await store.is_chat_closed(GROUP)
    await service.on_membership(membership("removed", status="kicked"))
    assert await store.is_chat_closed(GROUP)
    await service.on_membership(membership("updated", status="kicked"))
    assert await store.is_chat_closed(GROUP)
    await service.on_membership(membership("added"))
    assert not await store.is_chat_closed(GROUP)


async def test_private_chats_open_with_their_scene(
    store: InMemoryStore, service: ChatEventService
) -> None:
    await service.on_membership(membership("added", chat=OWNER))
    await service.on_membership(membership("added", chat=77))
    owner = await store.find_session(SessionKey(chat_id=OWNER))
    member = await store.find_session(SessionKey(chat_id=77))
    assert owner is not None
    assert member is not None
    assert (owner.scene, member.scene) == ("owner", "private")


async def test_under_members_a_strangers_private_chat_opens_nothing(
    store: InMemoryStore,
) -> None:
    policy = ChatEventPolicy(
        owner_id=OWNER, bot_id=BOT, allowed_chats=(GROUP,), private_chats="members"
    )
    service = ChatEventService(
        sessions=store,
        platform_messages=store,
        events=store,
        policy=policy,
        clock=SteppingClock(NOW),
    )
    await service.on_membership(membership("added", chat=77))  # a stranger unblocked the bot
    assert await store.find_session(SessionKey(chat_id=77)) is None
    await service.on_membership(membership("added", chat=OWNER))
    assert await store.find_session(SessionKey(chat_id=OWNER)) is not None


async def test_being_added_to_a_chat_outside_the_allow_list_opens_nothing(
    store: InMemoryStore, service: ChatEventService
) -> None:
    await service.on_membership(membership("added", chat=-555))
    assert await store.list_sessions() == ()


async def test_only_new_reactions_on_the_bots_own_messages_are_kept(
    store: InMemoryStore, service: ChatEventService
) -> None:
    await store.record_platform_messages(
        [
            PlatformMessage(chat_id=GROUP, message_id=1, sender_id=1001, date=NOW),
            PlatformMessage(
                chat_id=GROUP, message_id=2, sender_id=BOT, is_bot=True, date=NOW, thread_id=5
            ),
            PlatformMessage(chat_id=GROUP, message_id=3, sender_id=31337, is_bot=True, date=NOW),
        ]
    )
    await service.on_reaction(reacted(1))  # a member's message
    await service.on_reaction(reacted(3))  # another bot's message
    await service.on_reaction(reacted(4))  # unknown message
    await service.on_reaction(reacted(2, added=(), removed=("👍",)))  # withdrawn only
    channel = Sender(id=-100, name="Team", kind="anonymous_admin")
    await service.on_reaction(reacted(2, added=("👎", "🔥"), removed=("👍",), actor=channel))

    kept = await store.reactions_since(GROUP, 5, None, limit=10)
    assert [(r.user_name, r.emoji, r.message_id, r.created_at) for r in kept] == [
        ("Team", "👎", 2, NOW),
        ("Team", "🔥", 2, NOW),
    ]
    assert await store.reactions_since(GROUP, 0, None, limit=10) == ()


async def test_a_closed_chat_is_sent_nothing_other_chats_are(store: InMemoryStore) -> None:
    inner = RecordingMessenger()
    guard = ClosedChatGuard(inner, store.is_chat_closed)
    await store.open_session(SessionKey(chat_id=GROUP), scene="group")
    await store.open_session(SessionKey(chat_id=77), scene="private")
    await store.set_chat_closed(GROUP, True)

    refused = await guard.send_text(GROUP, "hello", reply_to=3)
    assert not refused.delivered
    assert isinstance(refused.error, ChatClosed)
    with pytest.raises(ChatClosed):
        await guard.send_photo(GROUP, b"png")
    with pytest.raises(ChatClosed):
        await guard.delete_message(GROUP, 3)
    with pytest.raises(ChatClosed):
        await guard.set_reaction(GROUP, 3, "👍")
    delivered = await guard.send_text(77, "hi")
    assert delivered.delivered
    assert [m.chat_id for m in inner.sent] == [77]
    assert inner.photos == []
    assert inner.deleted == []
    assert inner.reactions == []


class CountingStore:
    """Answers `is_chat_closed` from a set and counts the questions."""

    def __init__(self) -> None:
        self.closed: set[int] = set()
        self.asked = 0

    async def is_chat_closed(self, chat_id: int) -> bool:
        self.asked += 1
        return chat_id in self.closed


async def test_closed_chats_asks_the_store_once_per_ttl_and_counts_its_own_kicks_at_once() -> None:
    store = CountingStore()
    now = [100.0]
    closed = ClosedChats(store, ttl=5.0, monotonic=lambda: now[0])

    assert not await closed.is_chat_closed(GROUP)
    assert not await closed.is_chat_closed(GROUP)  # a reply's bubbles: one query, not one each
    assert store.asked == 1

    closed.note(GROUP, True)  # this process handled the kick: no wait for the ttl
    assert await closed.is_chat_closed(GROUP)
    assert store.asked == 1

    store.closed.discard(GROUP)  # another worker re-added the bot: seen once the ttl ran out
    now[0] += 5.0
    assert not await closed.is_chat_closed(GROUP)
    assert store.asked == 2
