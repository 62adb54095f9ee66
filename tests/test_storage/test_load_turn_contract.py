"""`load_turn`: a turn's reads in one call, equal to the four reads it stands for.

A turn prepares its request from the window (`load_history`), the summary of what precedes
the window (`find_summaries` under the record before it) and the reactions since the window
began (`reactions_since`). `load_turn` answers all three at once (on SQL, one statement);
these tests hold it to exactly what the separate reads answer, on every backend.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

import pytest

from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord, SummaryRecord, UserRecord
from bot.errors import SessionNotFound
from bot.ports import LoadedTurn, NewRecord, StoredReaction
from storage.sql import SqlStore
from testkit.memory_store import InMemoryStore
from tests.test_storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = -1001234567890123
TOPIC = 2**40
ALICE = Sender(id=7_000_000_001, name="Alice")


class TurnLoader(Protocol):
    async def load_turn(
        self, session_id: int, *, max_records: int, reactions_limit: int
    ) -> LoadedTurn: ...


def loader(store: Store) -> TurnLoader:
    assert isinstance(store, SqlStore | InMemoryStore)
    return store


def said(text: str, message_id: int, minute: int) -> NewRecord:
    return NewRecord(
        body=UserRecord(sender=ALICE, text=text),
        created_at=T0 + timedelta(minutes=minute),
        message_ids=(message_id,),
        tokens=3,
    )


def answered(text: str, message_id: int, minute: int) -> NewRecord:
    return NewRecord(
        body=AssistantRecord(text=text),
        created_at=T0 + timedelta(minutes=minute),
        message_ids=(message_id,),
        tokens=2,
    )


def reacted(
    message_id: int, minute: int, *, thread: int = TOPIC, emoji: str = "👍"
) -> StoredReaction:
    return StoredReaction(
        chat_id=CHAT,
        thread_id=thread,
        message_id=message_id,
        user_id=ALICE.id,
        user_name=ALICE.name,
        emoji=emoji,
        created_at=T0 + timedelta(minutes=minute, seconds=30),
    )


async def conversation(store: Store, turns: int) -> tuple[int, list[int]]:
    """A session of `turns` question/answer pairs, a minute apart; its record ids."""
    session = await store.open_session(SessionKey(chat_id=CHAT, thread_id=TOPIC), scene="group")
    ids: list[int] = []
    for turn in range(turns):
        stored = await store.append(
            session.id,
            [
                said(f"q{turn}", 100 + 2 * turn, 2 * turn),
                answered(f"a{turn}", 101 + 2 * turn, 2 * turn + 1),
            ],
        )
        ids.extend(r.id for r in stored)
    return session.id, ids


async def test_a_moved_window_comes_with_its_summary_and_the_reactions_since_it_began(
    store: Store,
) -> None:
    sid, ids = await conversation(store, 6)
    # the window starts at the fourth question; a summary covers what precedes it, and an
    # older one hangs under an earlier record (not what precedes this window)
    await store.set_window_start(sid, ids[6])
    await store.append(
        sid,
        [NewRecord(body=SummaryRecord(text="q0-a2"), created_at=T0, tokens=4)],
        parent_id=ids[5],
        move_leaf=False,
    )
    await store.append(
        sid,
        [NewRecord(body=SummaryRecord(text="q0-a1"), created_at=T0, tokens=4)],
        parent_id=ids[3],
        move_leaf=False,
    )
    await store.record_reactions(
        [
            reacted(101, 1),  # before the window began: not read
            reacted(107, 7),
            reacted(109, 9, emoji="🔥"),
            reacted(111, 10, emoji="🎉"),
            reacted(111, 10, thread=0),  # another thread of the chat
        ]
    )

    turn = await loader(store).load_turn(sid, max_records=100, reactions_limit=10)

    history = await store.load_history(sid, max_records=100)
    assert turn.history == history
    assert [r.body.text for r in history.records if isinstance(r.body, UserRecord)] == [
        "q3",
        "q4",
        "q5",
    ]
    first = history.records[0]
    assert first.parent_id is not None
    assert turn.summaries == await store.find_summaries(sid, [first.parent_id])
    assert [r.body for r in turn.summaries] == [SummaryRecord(text="q0-a2")]
    assert turn.reactions == await store.reactions_since(CHAT, TOPIC, first.created_at, limit=10)
    assert [(r.message_id, r.emoji) for r in turn.reactions] == [
        (107, "👍"),
        (109, "🔥"),
        (111, "🎉"),
    ]
    # the limit keeps the newest, oldest first, as reactions_since does
    newest = await loader(store).load_turn(sid, max_records=100, reactions_limit=2)
    assert [r.emoji for r in newest.reactions] == ["🔥", "🎉"]
    assert newest.reactions == await store.reactions_since(CHAT, TOPIC, first.created_at, limit=2)


async def test_a_window_cut_by_max_records_reads_from_its_oldest_record(store: Store) -> None:
    sid, ids = await conversation(store, 5)
    await store.record_reactions([reacted(103, 3), reacted(107, 7)])

    turn = await loader(store).load_turn(sid, max_records=4, reactions_limit=10)

    assert turn.history == await store.load_history(sid, max_records=4)
    assert [r.id for r in turn.history.records] == ids[-4:]
    assert turn.history.has_earlier
    assert turn.summaries == ()  # no summary was made
    assert [r.message_id for r in turn.reactions] == [107]


async def test_a_window_from_the_root_has_no_summary(store: Store) -> None:
    sid, _ids = await conversation(store, 2)
    await store.append(
        sid,
        [NewRecord(body=SummaryRecord(text="never shown"), created_at=T0, tokens=4)],
        at_root=True,
        move_leaf=False,
    )
    turn = await loader(store).load_turn(sid, max_records=100, reactions_limit=10)
    assert turn.history == await store.load_history(sid, max_records=100)
    assert not turn.history.has_earlier
    assert turn.summaries == ()
    assert turn.reactions == ()


async def test_an_empty_session_reads_nothing_but_itself(store: Store) -> None:
    session = await store.open_session(SessionKey(chat_id=CHAT, thread_id=TOPIC), scene="group")
    await store.record_reactions([reacted(5, 0)])
    turn = await loader(store).load_turn(session.id, max_records=100, reactions_limit=10)
    assert turn.history == await store.load_history(session.id, max_records=100)
    assert turn.history.records == ()
    assert (turn.summaries, turn.reactions) == ((), ())


async def test_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        await loader(store).load_turn(424242, max_records=100, reactions_limit=10)
    with pytest.raises(SessionNotFound):
        await store.load_history(424242, max_records=100)
