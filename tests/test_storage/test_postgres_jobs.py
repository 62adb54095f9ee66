"""PostgreSQL's whole jobs (`storage.postgres.jobs.FastPostgres`): the same rows and results
as SQLAlchemy's path, list parameters expanded, and a failing statement rolls the whole job
back."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bot.errors import SessionNotFound, StorageUnavailable
from storage.engine import create_engine_for
from storage.plan import Plan, Rows, Run
from storage.postgres.jobs import _IDLE as IDLE_BY_ENGINE
from storage.postgres.jobs import FastPostgres
from storage.queries import window_load
from storage.sql import SqlStore
from tests.fakes import SteppingClock
from tests.test_storage.conftest import database_url
from tests.test_storage.test_contract import CHAT, KEY, T0, reply, user
from tests.test_storage.test_inbound_batch import GROUP_A, GROUP_B, item, open_two
from tests.test_storage.test_sqlite_fast import bubble, conversation, dump

pytestmark = pytest.mark.postgres


async def fresh_store(tmp_path: Any, *, jobs: bool) -> SqlStore:
    store = SqlStore(
        create_engine_for(await database_url("postgres", tmp_path)), clock=SteppingClock(T0)
    )
    assert isinstance(store._db._fast, FastPostgres)
    if not jobs:
        store._db._fast = None
    return store


@pytest.fixture
async def store(tmp_path: Any) -> AsyncIterator[SqlStore]:
    made = await fresh_store(tmp_path, jobs=True)
    try:
        yield made
    finally:
        await made.close()


async def batch(store: SqlStore) -> list[Any]:
    """A `getUpdates` batch over two sessions, with a duplicate (list parameters)."""
    a, b = await open_two(store)
    items = [item(a, GROUP_A, 1, "one"), item(b, GROUP_B, 2, "two"), item(a, GROUP_A, 1, "dup")]
    stored = await store.append_inbound(items)
    return [None if r is None else r.id for r in stored]


async def test_jobs_write_the_same_rows_as_sqlalchemys_path(tmp_path: Any) -> None:
    results: list[Any] = []
    for jobs in (True, False):  # the same fresh database, once through each path
        made = await fresh_store(tmp_path, jobs=jobs)
        try:
            sid = await conversation(made)
            ids = await batch(made)
            made._decoded.__init__()  # type: ignore[misc]
            turn = await made.load_turn(sid, max_records=5, reactions_limit=10)
            found = [await made.find_platform_message(CHAT, m) for m in (10, 11, 30, 99)]
            results.append((await dump(made), sid, ids, turn, found, await made.find_session(KEY)))
        finally:
            await made.close()
    assert results[0] == results[1]
    _rows, _sid, ids, turn, _found, _session = results[0]
    assert None not in ids[:2]
    assert ids[2] is None  # the duplicate
    assert [r.emoji for r in turn.reactions] == ["👍"]
    assert [r.body.kind for r in turn.summaries] == ["summary"]


async def test_the_window_reads_the_same_rows_as_sqlalchemy(store: SqlStore) -> None:
    sid = await conversation(store)
    fast = store._db._fast
    assert isinstance(fast, FastPostgres)
    for summaries in (False, True):
        for reactions in (False, True):
            query = window_load(summaries=summaries, reactions=reactions)
            params = {"session_id": sid, "limit": 4, "reactions_limit": 3}
            mine = await fast.one_read(query, params)
            async with store.engine.connect() as conn:
                theirs = (await conn.execute(query, params)).all()
            assert [tuple(row) for row in mine] == [tuple(row) for row in theirs]
            assert [row.part for row in mine] == [row.part for row in theirs]


async def test_a_failing_statement_rolls_the_whole_append_back(store: SqlStore) -> None:
    sid = (await store.open_session(KEY, scene="group")).id
    await store.append(sid, [user("kept", 1)])
    before = await dump(store)
    async with store.engine.begin() as conn:  # the last statements of the job fail
        await conn.execute(
            text(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE check_violation USING MESSAGE = 'bubbles refused'; END $$"
            )
        )
        await conn.execute(
            text(
                "CREATE TRIGGER no_bubbles BEFORE INSERT ON platform_events "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        )
    with pytest.raises(StorageUnavailable, match="bubbles refused") as caught:
        await store.append(sid, [reply("lost", 2)], platform_messages=[bubble(2, "lost")])
    assert isinstance(caught.value.__cause__, asyncpg.exceptions.CheckViolationError)
    assert await dump(store) == before  # the record inserted before it is gone too
    async with store.engine.begin() as conn:
        await conn.execute(text("DROP TRIGGER no_bubbles ON platform_events"))
    (stored,) = await store.append(sid, [reply("kept too", 3)])  # the pool is whole
    assert (await store.load_history(sid, max_records=5)).records[-1] == stored


async def test_errors_of_the_store_are_raised_as_before(store: SqlStore) -> None:
    sid = (await store.open_session(KEY, scene="private")).id
    with pytest.raises(SessionNotFound, match="no session"):
        await store.append(sid + 100, [user("x", 1)])
    with pytest.raises(SessionNotFound, match="no record 999"):
        await store.append(sid, [user("x", 1)], parent_id=999)
    with pytest.raises(SessionNotFound):
        await store.load_turn(sid + 100, max_records=5, reactions_limit=5)


async def test_a_cancelled_write_commits_nothing_and_leaves_no_lock(store: SqlStore) -> None:
    sid = (await store.open_session(KEY, scene="group")).id
    await store.append(sid, [user("kept", 1)])
    before = await dump(store)
    async with store.engine.connect() as holder:  # another writer holds the session row
        await holder.execute(
            text("SELECT id FROM chat_sessions WHERE id = :id FOR UPDATE"), {"id": sid}
        )
        waiting = asyncio.ensure_future(store.append(sid, [reply("cancelled", 2)]))
        await wait_for_a_lock_wait(store)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await holder.rollback()
    assert await dump(store) == before
    (stored,) = await store.append(sid, [reply("next", 3)])  # the row is free again
    assert (await store.load_history(sid, max_records=5)).records[-1] == stored


async def wait_for_a_lock_wait(store: SqlStore) -> None:
    """Until a backend of the database waits for a lock."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    while True:
        async with store.engine.connect() as conn:
            if (await conn.execute(query)).scalar_one():
                return
        await asyncio.sleep(0.01)


async def test_a_lock_sent_with_its_begin_that_fails_leaves_the_connection_clean(
    store: SqlStore,
) -> None:
    """A plan's first statement, SQL text without parameters, goes in one simple query with
    the `BEGIN` (`storage.postgres.parts`' locks): when it fails, the transaction it began
    is rolled back before the connection goes back to the pool."""
    fast = store._db._fast
    assert isinstance(fast, FastPostgres)

    def failing() -> Plan[None]:
        yield Run("SELECT 1 / 0", ({},))

    def counting() -> Plan[int]:
        yield Run("SELECT pg_advisory_xact_lock(7)", ({},))
        rows = yield Rows(text("SELECT count(*) FROM chat_sessions WHERE id > :n"), {"n": 0})
        return int(rows[0][0])

    with pytest.raises(StorageUnavailable, match="division by zero"):
        await fast.write_plan(failing)
    assert await fast.write_plan(counting) == 0  # the same pooled connection, not aborted


async def test_jobs_reuse_the_idle_connections_and_close_gives_them_back(store: SqlStore) -> None:
    """A job's connection waits for the next job outside the pool (no checkout, no return),
    at most `keep` of them; closing the store gives every one back before the pool goes."""
    fast = store._db._fast
    assert isinstance(fast, FastPostgres)
    pool = store.engine.pool
    backend = text("SELECT pg_backend_pid() AS pid")
    first = await fast.one_read(backend, {})
    again = await fast.one_read(backend, {})
    assert first == again  # the same connection, kept idle in between
    assert pool.checkedout() == 1  # type: ignore[attr-defined]

    gate, started, all_started = asyncio.Event(), [], asyncio.Event()

    async def held_read() -> int:
        async def work(conn: asyncpg.Connection) -> int:
            started.append(conn)
            if len(started) == 6:
                all_started.set()
            await gate.wait()
            return int(await conn.fetchval("SELECT pg_backend_pid()"))

        return await fast.read(work)

    readers = [asyncio.create_task(held_read()) for _ in range(6)]
    await all_started.wait()  # six jobs at once: six connections
    gate.set()
    assert len(set(await asyncio.gather(*readers))) == 6
    assert pool.checkedout() == fast._idle.keep  # type: ignore[attr-defined]
    await fast.close()
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_disposing_the_engine_closes_the_idle_connections(tmp_path: Any) -> None:
    """An engine disposed without `close` (a store role on the store's engine) leaves no
    connection of its jobs open behind it."""
    store = await fresh_store(tmp_path, jobs=True)
    fast = store._db._fast
    assert isinstance(fast, FastPostgres)
    await fast.one_read(text("SELECT 1"), {})
    (_since, pooled) = fast._idle._idle[0]
    raw = pooled.driver_connection
    assert raw is not None
    assert not raw.is_closed()
    await store.engine.dispose()
    assert raw.is_closed()
    assert fast._idle._idle == []


def test_the_idle_connections_do_not_keep_an_engine_alive() -> None:
    """One `IdleConnections` per engine, held by the engine: a dropped engine goes."""
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:1/none")
    assert FastPostgres(engine)._idle is FastPostgres(engine)._idle
    gone = weakref.ref(engine.sync_engine)
    assert gone() in IDLE_BY_ENGINE
    del engine
    gc.collect()
    assert gone() is None
