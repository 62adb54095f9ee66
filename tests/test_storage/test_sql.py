"""What only the SQL store has: the alias cache, persistence across instances."""

from __future__ import annotations

from sqlalchemy import text

from bot.context.alias_derivation import AliasCounter
from bot.domain.ids import SessionKey
from storage.engine import create_engine_for
from storage.sql import SqlStore
from tests.test_storage.test_contract import user


async def test_a_missing_alias_cache_is_rebuilt_from_the_path(sql_url: str) -> None:
    store = SqlStore(create_engine_for(sql_url))
    try:
        sid = (await store.open_session(SessionKey(chat_id=-5), scene="group")).id
        trunk = await store.append(sid, [user(f"u{i}", 300 + i % 4) for i in range(8)])
        await store.append(sid, [user("side", 900)], parent_id=trunk[2].id, move_leaf=False)
        await store.set_window_start(sid, trunk[5].id)
        expected = await store.load_history(sid, max_records=10)

        async with store._engine.begin() as conn:  # a bulk import that skipped the cache
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
        async with store._engine.begin() as conn:
            await conn.execute(
                text("UPDATE agent_messages SET alias_seq = NULL, alias_last = NULL")
            )
        (c,) = await store.append(sid, [user("c", 1)])
        assert c.alias_seq == 1  # the repeated id 1 is found on the repaired path
        got = await store.get_record(b.id)
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
