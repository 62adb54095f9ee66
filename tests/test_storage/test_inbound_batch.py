"""Group commit (`append_inbound`, `open_sessions`) on every backend: a batch is stored like
the same messages appended one by one, duplicates and bad items are skipped, and the rest
of the batch is stored."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import UserRecord
from bot.ports import InboundAppend, NewRecord, SessionRequest
from storage.engine import create_engine_for
from storage.sql import SqlStore
from tests.test_storage.conftest import Store, database_url
from tests.test_storage.test_contract import assert_aliases_match_full_path, reply

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ANN = Sender(id=7_000_000_001, name="Ann")
GROUP_A = SessionKey(chat_id=-1001, thread_id=0)
GROUP_B = SessionKey(chat_id=-1002, thread_id=2**40)
BIG = 2**31 + 7


def item(session_id: int, key: SessionKey, message_id: int, text: str) -> InboundAppend:
    return InboundAppend(
        session_id=session_id,
        record=NewRecord(
            body=UserRecord(sender=ANN, text=text),
            created_at=T0,
            message_ids=(message_id,),
            tokens=2,
        ),
        platform_message=PlatformMessage(
            chat_id=key.chat_id,
            thread_id=key.thread_id,
            message_id=message_id,
            sender_id=ANN.id,
            sender_name=ANN.name,
            date=T0,
            text=text,
        ),
    )


async def texts(store: Store, session_id: int) -> list[str]:
    return [
        r.body.text for r in await store.load_path(session_id) if isinstance(r.body, UserRecord)
    ]


async def open_two(store: Store) -> tuple[int, int]:
    a, b = await store.open_sessions(
        [
            SessionRequest(key=GROUP_A, scene="group", title="A"),
            SessionRequest(key=GROUP_B, scene="group", title="B"),
        ]
    )
    assert (a.key, a.title, b.key, b.title) == (GROUP_A, "A", GROUP_B, "B")
    return a.id, b.id


async def test_open_sessions_finds_creates_and_updates(store: Store) -> None:
    a, b = await open_two(store)
    again = await store.open_sessions(
        [
            SessionRequest(key=GROUP_B, scene="group"),
            SessionRequest(key=GROUP_A, scene="group", title="A renamed"),
        ]
    )
    assert [s.id for s in again] == [b, a]
    assert again[1].title == "A renamed"
    found = await store.find_session(GROUP_A)
    assert found is not None
    assert found.title == "A renamed"


async def test_a_batch_chains_each_session_in_order_and_moves_its_leaf(store: Store) -> None:
    a, b = await open_two(store)
    # a session with history: an answered message before the batch
    (_first,) = await store.append(a, [item(a, GROUP_A, 1, "before").record])
    await store.append(a, [reply("answer", 2)])
    batch = [
        item(a, GROUP_A, BIG + 3, "a1"),
        item(b, GROUP_B, 5, "b1"),
        item(a, GROUP_A, BIG + 4, "a2"),
        item(b, GROUP_B, 6, "b2"),
    ]
    stored = await store.append_inbound(batch)
    assert all(r is not None for r in stored)
    assert await texts(store, a) == ["before", "a1", "a2"]
    assert await texts(store, b) == ["b1", "b2"]
    for session_id, last in ((a, stored[2]), (b, stored[3])):
        info = await store.find_session(GROUP_A if session_id == a else GROUP_B)
        assert info is not None
        assert last is not None
        assert info.active_leaf_id == last.id
        await assert_aliases_match_full_path(store, session_id, max_records=10)
    # what it returned is what a read gives back
    path = await store.load_path(a)
    assert [(r.id, r.alias_seq, r.alias_parts) for r in path[-2:]] == [
        (r.id, r.alias_seq, r.alias_parts) for r in (stored[0], stored[2]) if r is not None
    ]
    event = await store.find_platform_message(GROUP_B.chat_id, 6)
    assert event is not None
    assert stored[3] is not None
    assert event.record_id == stored[3].id
    assert event.thread_id == GROUP_B.thread_id


async def test_duplicates_in_the_store_and_in_the_batch_are_stored_once(store: Store) -> None:
    a, _ = await open_two(store)
    assert (await store.append_inbound([item(a, GROUP_A, 1, "one")]))[0] is not None
    stored = await store.append_inbound(
        [item(a, GROUP_A, 1, "one again"), item(a, GROUP_A, 2, "two"), item(a, GROUP_A, 2, "two")]
    )
    assert [r is not None for r in stored] == [False, True, False]
    assert await texts(store, a) == ["one", "two"]


async def test_an_item_that_cannot_be_stored_is_skipped_and_the_rest_stored(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = await open_two(store)
    stored = await store.append_inbound(
        [item(a, GROUP_A, 1, "fine"), item(999_999, GROUP_B, 7, "no such session"),
         item(b, GROUP_B, 8, "fine too")]
    )  # fmt: skip
    assert [r is not None for r in stored] == [True, False, True]
    assert await texts(store, a) == ["fine"]
    assert await texts(store, b) == ["fine too"]


async def test_bad_data_in_sql_skips_only_that_item(
    sql_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    sql_store = SqlStore(create_engine_for(sql_url))
    try:
        await bad_data_in_sql(sql_store, caplog)
    finally:
        await sql_store.close()


async def bad_data_in_sql(sql_store: SqlStore, caplog: pytest.LogCaptureFixture) -> None:
    a, b = await open_two(sql_store)
    too_big = 2**64  # no 64-bit column holds it: the statement fails on this row
    stored = await sql_store.append_inbound(
        [item(a, GROUP_A, 1, "fine"), item(b, GROUP_B, too_big, "bad"), item(b, GROUP_B, 2, "ok")]
    )
    assert [r is not None for r in stored] == [True, False, True]
    assert await texts(sql_store, a) == ["fine"]
    assert await texts(sql_store, b) == ["ok"]
    assert f"not storing message {GROUP_B.chat_id}/{too_big}" in caplog.text


async def test_a_session_with_a_known_message_id_takes_the_ordinary_path(store: Store) -> None:
    """A message id already on a record of the session (an edit re-answered, an import):
    the alias is the earlier one, exactly as `append` derives it."""
    a, _ = await open_two(store)
    await store.append(a, [item(a, GROUP_A, 10, "imported").record])
    stored = await store.append_inbound(
        [item(a, GROUP_A, 10, "again"), item(a, GROUP_A, 11, "new")]
    )
    assert [r is not None for r in stored] == [True, True]
    assert await texts(store, a) == ["imported", "again", "new"]
    await assert_aliases_match_full_path(store, a, max_records=10)


async def test_a_refused_row_on_the_ordinary_path_skips_only_that_item(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The items after a known message id go one by one through `append` (on SQLite one
    job on the connection's thread); a row SQLite refuses there is skipped, as in a batch."""
    sql_store = SqlStore(create_engine_for(await database_url("sqlite", tmp_path)))
    try:
        a, _ = await open_two(sql_store)
        await sql_store.append(a, [item(a, GROUP_A, 10, "imported").record])
        async with sql_store.engine.begin() as conn:
            await conn.execute(
                text(
                    "CREATE TRIGGER refuse_11 BEFORE INSERT ON platform_events "
                    "WHEN NEW.message_id = 11 BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            )
        stored = await sql_store.append_inbound(
            [item(a, GROUP_A, 10, "again"), item(a, GROUP_A, 11, "no"), item(a, GROUP_A, 12, "ok")]
        )
        assert [r is not None for r in stored] == [True, False, True]
        assert await texts(sql_store, a) == ["imported", "again", "ok"]
        assert f"not storing message {GROUP_A.chat_id}/11" in caplog.text
    finally:
        await sql_store.close()
