"""Reply bubbles are stored as Telegram confirms each one, and only what was delivered stays."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.agent.partial_reply import settle_partial_reply
from bot.agent.reply import ReplyBubbles
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import Delivery
from bot.domain.records import AssistantRecord, UserRecord
from bot.ports import NewRecord, SessionInfo
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, RecordingMessenger, SteppingClock

CHAT = -100700
TEXT = "aaaaabbbbbccccc"  # three bubbles of five characters


@dataclass(slots=True)
class Rig:
    store: InMemoryStore = field(default_factory=InMemoryStore)
    clock: SteppingClock = field(default_factory=SteppingClock)
    messenger: RecordingMessenger = field(default_factory=lambda: RecordingMessenger(limit=5))

    @property
    def bubbles(self) -> ReplyBubbles:
        return ReplyBubbles(
            messenger=self.messenger,
            store=self.store,
            platform_messages=self.store,
            clock=self.clock,
            bot_id=999,
            bot_name="Helper",
        )

    async def session(self) -> SessionInfo:
        session = await self.store.open_session(SessionKey(chat_id=CHAT), scene="group")
        await self.store.append(
            session.id,
            [
                NewRecord(
                    body=UserRecord(sender=ALICE, text="@Helper tell me"),
                    created_at=self.clock.now(),
                    message_ids=(7,),
                )
            ],
        )
        return session


async def test_each_confirmed_bubble_is_stored_when_it_is_confirmed() -> None:
    rig = Rig()
    session = await rig.session()
    recorder = rig.bubbles.recorder(session, reply_to=7, text=TEXT)
    stored_after_each: list[tuple[int | None, ...]] = []

    async def on_bubble(delivery: Delivery) -> None:
        await recorder(delivery)
        stored_after_each.append((await rig.store.load_path(session.id))[-1].message_ids)

    delivery = await rig.messenger.send_text(CHAT, TEXT, reply_to=7, on_bubble=on_bubble)
    await recorder.settle(delivery)

    a, b, c = delivery.message_ids
    assert stored_after_each == [(a, None, None), (a, b, None), (a, b, c)]
    path = await rig.store.load_path(session.id)
    assert len(path) == 2
    # the record holds the reply as the model wrote it, not the bubbles joined
    assert path[-1].body == AssistantRecord(text=TEXT)
    for mid, text in zip((a, b, c), ("aaaaa", "bbbbb", "ccccc"), strict=True):
        assert mid is not None
        event = await rig.store.find_platform_message(CHAT, mid)
        assert event is not None
        assert (event.text, event.sender_id, event.sender_name, event.is_bot) == (
            text,
            999,
            "Helper",
            True,
        )
        assert (event.reply_to_message_id, event.record_id) == (7, path[-1].id)


async def test_a_reply_cut_short_keeps_only_the_delivered_bubbles() -> None:
    rig = Rig()
    rig.messenger.fail_bubbles = {2}
    session = await rig.session()
    recorder = rig.bubbles.recorder(session, reply_to=7, text=TEXT)

    delivery = await rig.messenger.send_text(CHAT, TEXT, reply_to=7, on_bubble=recorder)
    await recorder.settle(delivery)

    first = delivery.message_ids[0]
    assert first is not None
    assert delivery.message_ids[1:] == (None, None)
    path = await rig.store.load_path(session.id)
    assert [r.kind for r in path] == ["user", "assistant"]
    assert path[-1].body == AssistantRecord(text="aaaaa")
    assert path[-1].message_ids == (first,)
    event = await rig.store.find_platform_message(CHAT, first)
    assert event is not None
    assert event.record_id == path[-1].id


async def test_nothing_delivered_stores_nothing() -> None:
    rig = Rig()
    rig.messenger.fail_bubbles = {1}
    session = await rig.session()
    recorder = rig.bubbles.recorder(session, reply_to=7, text=TEXT)

    delivery = await rig.messenger.send_text(CHAT, TEXT, reply_to=7, on_bubble=recorder)
    await recorder.settle(delivery)

    assert not delivery.delivered
    assert [r.kind for r in await rig.store.load_path(session.id)] == ["user"]


async def test_settling_a_reply_a_crash_cut_short_replaces_it_by_its_delivered_part() -> None:
    rig = Rig()
    session = await rig.session()
    (user,) = await rig.store.load_path(session.id)
    (cut,) = await rig.store.append(
        session.id,
        [
            NewRecord(
                body=AssistantRecord(text="one\ntwo"),
                created_at=rig.clock.now(),
                message_ids=(501, None),
            )
        ],
    )
    delivery = Delivery(message_ids=(501, None), texts=("one", "two"))

    sibling = await settle_partial_reply(rig.bubbles, session, cut, delivery, reply_to=7)

    assert sibling.parent_id == user.id
    assert (sibling.body, sibling.message_ids) == (AssistantRecord(text="one"), (501,))
    assert sibling.created_at == cut.created_at
    assert (await rig.store.load_path(session.id))[-1].id == sibling.id
    event = await rig.store.find_platform_message(CHAT, 501)
    assert event is not None
    assert (event.record_id, event.date) == (sibling.id, rig.clock.now())
