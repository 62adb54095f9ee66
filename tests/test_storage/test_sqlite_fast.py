"""SQLite's whole jobs (`storage.sqlite.jobs.FastSqlite`): same rows and results as
SQLAlchemy's path, one driver job each, and a failing statement rolls the whole job back."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import bindparam, select, text, tuple_
from sqlalchemy import event as sa_event
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import SummaryRecord
from bot.errors import SessionNotFound, StorageUnavailable
from bot.ports import InboundAppend, NewRecord, SessionRequest, StoredReaction
from storage.engine import create_engine_for
from storage.queries import window_load
from storage.sql import SqlStore
from storage.sqlite import backend as sqlite_backend
from storage.sqlite import driver as sqlite_driver
from storage.tables import MESSAGES
from tests.fakes import SteppingClock
from tests.test_storage.conftest import database_url
from tests.test_storage.test_contract import ALICE, CHAT, KEY, T0, event, reply, user

TABLES = ("chat_sessions", "agent_messages", "platform_events", "message_search")


class Trips:
    """Jobs run by every connection `engine` has handed out since (on the event loop, or
    handed to the connection's thread: each a statement's or a whole job's run)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._drivers: dict[int, sqlite_driver.Connection] = {}
        self._own = sqlite_backend._DRIVEN[engine.sync_engine]
        sa_event.listen(engine.sync_engine, "checkout", self._on_checkout)

    def _on_checkout(self, dbapi_connection: Any, *_rest: Any) -> None:
        driver = dbapi_connection.driver_connection
        assert isinstance(driver, sqlite_driver.Connection)
        self._drivers[id(driver)] = driver

    def __call__(self) -> int:
        for driver in self._own.opened():  # the whole jobs' own connections
            self._drivers[id(driver)] = driver
        return sum(driver.trips + driver.inline_runs for driver in self._drivers.values())


async def two_stores(tmp_path: Path) -> tuple[SqlStore, SqlStore]:
    """Two stores on copies of one fresh database: one with the fast path, one without."""
    fast_url = await database_url("sqlite", tmp_path / "fast")
    slow_url = await database_url("sqlite", tmp_path / "slow")
    fast = SqlStore(create_engine_for(fast_url), clock=SteppingClock(T0))
    slow = SqlStore(create_engine_for(slow_url), clock=SteppingClock(T0))
    assert fast._db._fast is not None
    slow._db._fast = None
    return fast, slow


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqlStore, SqlStore]]:
    fast, slow = await two_stores(tmp_path)
    try:
        yield fast, slow
    finally:
        await fast.close()
        await slow.close()


async def dump(store: SqlStore) -> dict[str, list[tuple[Any, ...]]]:
    async with store.engine.connect() as conn:
        return {
            table: [tuple(row) for row in await conn.execute(text(f"SELECT * FROM {table}"))]
            for table in TABLES
        }


def bubble(message_id: int, body: str, *, bot: bool = True) -> PlatformMessage:
    return PlatformMessage(
        chat_id=CHAT,
        thread_id=KEY.thread_id,
        message_id=message_id,
        sender_id=None if bot else ALICE.id,
        sender_name="Bot" if bot else ALICE.name,
        is_bot=bot,
        date=T0 + timedelta(seconds=message_id),
        text=body,
    )


async def conversation(store: SqlStore) -> int:
    """Appends of every shape the bot makes: inbound, replies with bubbles, several records,
    a repeated platform id, a branch, a summary, a bubble without words, reactions."""
    sid = (await store.open_session(KEY, scene="group", title="Team")).id
    (first,) = await store.append(sid, [user("hello there", 10)], platform_messages=[event(10)])
    await store.append(
        sid, [reply("hi! 你好", 11, 12)], platform_messages=[bubble(11, "hi!"), bubble(12, "你好")]
    )
    await store.append(sid, [user("two", 13), reply("three"), user("again", 10)])
    await store.append(sid, [user("side", 20)], parent_id=first.id, move_leaf=False)
    summary = NewRecord(body=SummaryRecord(text="so far"), created_at=T0, message_ids=(), tokens=1)
    await store.append(sid, [summary], parent_id=first.id, move_leaf=False)
    await store.append(sid, [reply("📎", 30)], platform_messages=[bubble(30, "")])
    await store.append(sid, [user("root", 40)], at_root=True, move_leaf=False)
    await store.record_reactions(
        [
            StoredReaction(
                chat_id=CHAT,
                thread_id=KEY.thread_id,
                message_id=11,
                user_id=ALICE.id,
                user_name=ALICE.name,
                emoji="👍",
                created_at=T0 + timedelta(minutes=1),
            )
        ]
    )
    return sid


async def test_appends_write_the_same_rows_as_sqlalchemys_path(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, slow = stores
    sid = await conversation(fast)
    assert await conversation(slow) == sid
    assert await dump(fast) == await dump(slow)
    for store in (fast, slow):  # the same loads through either path
        store._decoded.__init__()  # type: ignore[misc]
    turn = await fast.load_turn(sid, max_records=5, reactions_limit=10)
    assert turn == await slow.load_turn(sid, max_records=5, reactions_limit=10)
    assert [r.emoji for r in turn.reactions] == ["👍"]
    assert [r.body.kind for r in turn.summaries] == ["summary"]
    assert len(turn.history.records) == 5
    assert await fast.load_history(sid, max_records=50) == await slow.load_history(
        sid, max_records=50
    )
    for message_id in (10, 11, 30, 99):
        found = await fast.find_platform_message(CHAT, message_id)
        assert found == await slow.find_platform_message(CHAT, message_id)
    assert (await fast.find_platform_message(CHAT, 11)).is_bot is True  # type: ignore[union-attr]
    assert await fast.find_session(KEY) == await slow.find_session(KEY) is not None
    await fast.set_chat_closed(CHAT, True)
    assert await fast.is_chat_closed(CHAT)
    assert not await slow.is_chat_closed(CHAT)
    # one database (closed now) read through either path: `slow` borrows the fast one
    slow._db._fast, fast._db._fast = fast._db._fast, None
    assert await slow.load_turn(sid, max_records=2, reactions_limit=1) == await fast.load_turn(
        sid, max_records=2, reactions_limit=1
    )


async def test_the_window_reads_the_same_rows_as_sqlalchemy(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, _slow = stores
    sid = await conversation(fast)
    assert fast._db._fast is not None
    for summaries in (False, True):
        for reactions in (False, True):
            query = window_load(summaries=summaries, reactions=reactions)
            params = {"session_id": sid, "limit": 4, "reactions_limit": 3}
            prepared = fast._db._fast.prepared(query)
            mine = await fast._db._fast.read(lambda conn: prepared.rows(conn, params))  # noqa: B023
            async with fast.engine.connect() as conn:
                theirs = (await conn.execute(query, params)).all()
            assert [tuple(row) for row in mine] == [tuple(row) for row in theirs]
            assert [row.part for row in mine] == [row.part for row in theirs]


async def test_an_append_and_a_window_read_are_one_job_each(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, slow = stores
    counts: list[tuple[int, int]] = []
    for store in (fast, slow):
        trips = Trips(store.engine)
        sid = (await store.open_session(KEY, scene="group")).id
        await store.append(sid, [user("warm", 1)])
        await store.load_turn(sid, max_records=5, reactions_limit=5)
        before = trips()
        await store.append(sid, [reply("hi", 2)], platform_messages=[bubble(2, "hi")])
        wrote = trips() - before
        await store.load_turn(sid, max_records=5, reactions_limit=5)
        counts.append((wrote, trips() - before - wrote))
    # SQLAlchemy's path: the head, the insert, the bubble, its index entry, the leaf, COMMIT
    assert counts == [(1, 1), (6, 1)]


def inbound(session_id: int, key: SessionKey, message_id: int, body: str) -> InboundAppend:
    return InboundAppend(
        session_id=session_id,
        record=user(body, message_id),
        platform_message=PlatformMessage(
            chat_id=key.chat_id,
            thread_id=key.thread_id,
            message_id=message_id,
            sender_id=ALICE.id,
            sender_name=ALICE.name,
            date=T0,
            text=body,
        ),
    )


async def test_an_inbound_batch_writes_the_same_rows_in_one_job(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, slow = stores
    other = SessionKey(chat_id=-77, thread_id=3)
    jobs: list[int] = []
    for store in (fast, slow):
        trips = Trips(store.engine)
        a, b = await store.open_sessions(
            [SessionRequest(key=KEY, scene="group"), SessionRequest(key=other, scene="group")]
        )
        await store.append_inbound([inbound(a.id, KEY, 1, "warm")])
        before = trips()
        batch = [
            inbound(a.id, KEY, 2, "two"),
            inbound(b.id, other, 2, "b two"),
            inbound(a.id, KEY, 1, "a duplicate"),
            inbound(a.id, KEY, 3, "three"),
        ]
        stored = await store.append_inbound(batch)
        jobs.append(trips() - before)
        assert [r is None for r in stored] == [False, False, True, False]
    assert await dump(fast) == await dump(slow)
    # the fast path: one job; SQLAlchemy's: a statement each, the BEGIN and the COMMIT
    assert jobs[0] == 1 < jobs[1]


async def test_a_statement_with_expanding_parameters_reads_as_sqlalchemy(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, _slow = stores
    sid = await conversation(fast)
    assert fast._db._fast is not None
    query = select(MESSAGES.c.id, MESSAGES.c.created_at).where(
        tuple_(MESSAGES.c.session_id, MESSAGES.c.first_message_id).in_(
            bindparam("pairs", expanding=True)
        ),
        MESSAGES.c.kind.in_(bindparam("kinds", expanding=True)),
    )
    for params in (
        {"pairs": [(sid, 10), (sid, 11), (sid, 99)], "kinds": ["user", "assistant"]},
        {"pairs": [(sid, 13)], "kinds": ["user"]},
        {"pairs": [], "kinds": ["user"]},
    ):
        mine = await fast._db.one_read(query, params)
        async with fast.engine.connect() as conn:
            theirs = (await conn.execute(query, params)).all()
        assert [tuple(row) for row in mine] == [tuple(row) for row in theirs]
        assert all(isinstance(row.created_at, datetime) for row in mine)
    assert not mine
    assert not theirs


async def test_a_failing_statement_rolls_the_whole_append_back(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, _slow = stores
    sid = (await fast.open_session(KEY, scene="group")).id
    await fast.append(sid, [user("kept", 1)])
    before = await dump(fast)
    async with fast.engine.begin() as conn:  # the last statements of the job fail
        await conn.execute(
            text(
                "CREATE TRIGGER no_bubbles BEFORE INSERT ON platform_events "
                "BEGIN SELECT RAISE(ABORT, 'bubbles refused'); END"
            )
        )
    with pytest.raises(StorageUnavailable, match="bubbles refused") as caught:
        await fast.append(sid, [reply("lost", 2)], platform_messages=[bubble(2, "lost")])
    assert isinstance(caught.value.__cause__, sqlite3.IntegrityError)
    assert await dump(fast) == before  # the record inserted before it is gone too
    # and the connection is whole: the next append works
    async with fast.engine.begin() as conn:
        await conn.execute(text("DROP TRIGGER no_bubbles"))
    (stored,) = await fast.append(sid, [reply("kept too", 3)])
    assert (await fast.load_history(sid, max_records=5)).records[-1] == stored


async def test_errors_of_the_store_are_raised_as_before(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    fast, _slow = stores
    sid = (await fast.open_session(SessionKey(chat_id=5), scene="private")).id
    with pytest.raises(SessionNotFound, match="no session"):
        await fast.append(sid + 100, [user("x", 1)])
    with pytest.raises(SessionNotFound, match="no record 999"):
        await fast.append(sid, [user("x", 1)], parent_id=999)
    with pytest.raises(SessionNotFound):
        await fast.load_turn(sid + 100, max_records=5, reactions_limit=5)


async def test_a_locked_database_is_storage_unavailable(tmp_path: Path) -> None:
    url = await database_url("sqlite", tmp_path)
    store = SqlStore(create_engine_for(url, busy_timeout_ms=50))
    try:
        sid = (await store.open_session(KEY, scene="group")).id
        other = sqlite3.connect(url.removeprefix("sqlite+aiosqlite:///"), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StorageUnavailable, match="locked"):
                await store.append(sid, [user("x", 1)])
            other.execute("ROLLBACK")
        finally:
            other.close()
        await store.append(sid, [user("x", 1)])
    finally:
        await store.close()


async def test_a_one_trip_transaction_rolls_back_on_error_and_raises_the_sqlite_error(
    tmp_path: Path,
) -> None:
    def opener() -> sqlite3.Connection:
        return sqlite3.connect(tmp_path / "t.sqlite3", isolation_level=None)

    driver = await sqlite_driver.connect(opener)
    try:
        await driver.run(lambda conn: conn.execute("CREATE TABLE t (x INTEGER UNIQUE)"))
        before = driver.trips

        def two_then_a_duplicate(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("INSERT INTO t VALUES (1)")

        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            await driver.run_transaction(two_then_a_duplicate)
        assert driver.trips == before + 1
        assert not driver.in_transaction
        rows = await driver.run(lambda conn: conn.execute("SELECT x FROM t").fetchall())
        assert rows == []

        def two(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t VALUES (1)")
            return conn.execute("INSERT INTO t VALUES (2) RETURNING x").fetchall()[0][0]

        assert await driver.run_transaction(two) == 2
        assert not driver.in_transaction
        await driver.rollback()  # nothing open: answered without a trip
        assert driver.trips == before + 3
    finally:
        await driver.close()
