"""What only the SQL store has: the alias cache, persistence across instances."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from sqlalchemy import text

from bot.context.alias_table import AliasCounter
from bot.domain.ids import SessionKey
from storage.codec import DecodedRecords
from storage.engine import create_engine_for
from storage.payload import encode_payload
from storage.sql import SqlStore
from tests.store_inspector import get_record
from tests.test_storage.test_contract import user


async def test_a_missing_alias_cache_is_rebuilt_from_the_path(sql_url: str) -> None:
    store = SqlStore(create_engine_for(sql_url))
    try:
        sid = (await store.open_session(SessionKey(chat_id=-5), scene="group")).id
        trunk = await store.append(sid, [user(f"u{i}", 300 + i % 4) for i in range(8)])
        await store.append(sid, [user("side", 900)], parent_id=trunk[2].id, move_leaf=False)
        await store.set_window_start(sid, trunk[5].id)
        expected = await store.load_history(sid, max_records=10)

        async with store.engine.begin() as conn:  # a bulk import that skipped the cache
            await conn.execute(
                text("UPDATE agent_messages SET alias_seq = NULL, alias_last = NULL")
            )

        assert await store.load_history(sid, max_records=10) == expected
        counter = AliasCounter()
        path = await store.load_path(sid)
        assert [r.alias_seq for r in path] == [counter.assign(r.message_ids).seq for r in path]
    finally:
        await store.close()


async def test_appending_under_an_uncached_record_repairs_first(sql_url: str) -> None:
    store = SqlStore(create_engine_for(sql_url))
    try:
        sid = (await store.open_session(SessionKey(chat_id=-6), scene="group")).id
        a, b = await store.append(sid, [user("a", 1), user("b", 2)])
        async with store.engine.begin() as conn:
            await conn.execute(
                text("UPDATE agent_messages SET alias_seq = NULL, alias_last = NULL")
            )
        (c,) = await store.append(sid, [user("c", 1)])
        assert c.alias_seq == 1  # the repeated id 1 is found on the repaired path
        got = await get_record(store, b.id)
        assert got is not None
        assert got.alias_parts == ("m2",)
        (d,) = await store.append(sid, [user("d", 3)])
        assert d.alias_seq == 3
        assert a.alias_seq == 1
    finally:
        await store.close()


async def test_everything_survives_a_new_store_instance(sql_url: str) -> None:
    first = SqlStore(create_engine_for(sql_url))
    try:
        sid = (await first.open_session(SessionKey(chat_id=-7), scene="owner")).id
        await first.append(sid, [user("a", 1), user("b", 2)])
        before = await first.load_history(sid, max_records=5)
        assert await first.claim_update(5)
    finally:
        await first.close()
    second = SqlStore(create_engine_for(sql_url))
    try:
        assert await second.load_history(sid, max_records=5) == before
        assert not await second.claim_update(5)
    finally:
        await second.close()


async def test_another_process_changing_a_row_is_seen_on_the_next_read(sql_url: str) -> None:
    """Decoded records are reused across reads (every turn reads its window again), but a
    row another worker changed since is read as it is now."""
    ours = SqlStore(create_engine_for(sql_url))
    theirs = SqlStore(create_engine_for(sql_url))
    try:
        sid = (await ours.open_session(SessionKey(chat_id=-8), scene="group")).id
        first, second = await ours.append(sid, [user("hello", 11), user("later", None)])
        before = await ours.load_history(sid, max_records=10)
        again = await ours.load_history(sid, max_records=10)
        assert again == before
        assert again.records[0] is before.records[0], "an unchanged row is not decoded again"

        await theirs.set_message_ids(second.id, [12, 13])  # the other worker confirms bubbles
        async with theirs.engine.begin() as conn:  # and an edit rewrites the first payload
            await conn.execute(
                text("UPDATE agent_messages SET payload = replace(payload, 'hello', 'edited')")
            )
        now = await ours.load_history(sid, max_records=10)
        assert [r.id for r in now.records] == [first.id, second.id]
        assert now.records[0].body == user("edited", 11).body
        assert now.records[1].message_ids == (12, 13)
        assert now.records[1].alias_parts == ("m2", "m2.2")
    finally:
        await ours.close()
        await theirs.close()


def _record_row(record_id: int, text: str = "x") -> SimpleNamespace:
    """A row of `RECORD_COLUMNS` as the database hands it back."""
    return SimpleNamespace(
        id=record_id,
        session_id=1,
        parent_id=None,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        payload=encode_payload(user(text, 1).body, (record_id,)),
        tokens=3,
        alias_seq=record_id,
    )


def test_the_decoded_records_kept_are_bounded() -> None:
    decoded = DecodedRecords(capacity=3)
    first, second = decoded.record(_record_row(1)), decoded.record(_record_row(2))
    for record_id in (3, 1, 4):  # 1 was used again: 2 is now the least recently used
        decoded.record(_record_row(record_id))
    assert len(decoded) == 3
    assert decoded.record(_record_row(1)) is first, "kept"
    again = decoded.record(_record_row(2))
    assert again == second
    assert again is not second, "evicted, so decoded afresh"


def test_the_decoded_records_kept_are_bounded_in_characters_too() -> None:
    """Long tool results: the bound on payload characters evicts before the count does."""
    size = len(_record_row(1, "x" * 900).payload)
    decoded = DecodedRecords(capacity=100, max_chars=2 * size + 10)
    kept = [decoded.record(_record_row(record_id, "x" * 900)) for record_id in range(1, 6)]
    assert len(decoded) == 2
    assert decoded.record(_record_row(5, "x" * 900)) is kept[-1], "the newest are kept"
