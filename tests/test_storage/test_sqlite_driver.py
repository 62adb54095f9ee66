"""The SQLite driver under SQLAlchemy: one trip per statement, and every guarantee of the engine.

Another process on the same file is played by a plain `sqlite3` connection in the test.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import inspect
import re
import sqlite3
import threading
import tomllib
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from sqlalchemy import Column, Integer, MetaData, String, Table, column, select, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.errors import StorageUnavailable
from bot.ports import NewRecord
from storage.engine import ONE_STATEMENT, WRITE, create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from storage.sqlite import cursor as sqlite_cursor
from storage.sqlite import driver as sqlite_driver
from tests.deadlines import EVENT, deadline

NOTES = Table(
    "notes",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("body", String, nullable=False),
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "bot.sqlite3"


@pytest.fixture
async def engine(path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine_for(f"sqlite:///{path}")
    async with engine.begin() as conn:
        await conn.run_sync(NOTES.metadata.create_all)
    try:
        yield engine
    finally:
        await engine.dispose()


async def driver_of(conn: AsyncConnection) -> sqlite_driver.Connection:
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, sqlite_driver.Connection)
    return driver


@contextmanager
def other_writer(path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's connection, holding the write lock until the block ends."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield other
        other.execute("COMMIT")
    finally:
        other.close()


def write_lock_is_free(path: Path) -> bool:
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return False
    finally:
        other.close()
    return True


def driver_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "tgbot-sqlite"}


# ------------------------------------------------------------------ trips


async def test_a_statement_runs_on_the_loop_without_a_trip_to_the_thread(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as conn:
        await conn.execution_options(**ONE_STATEMENT)
        driver = await driver_of(conn)
        trips, inline = driver.trips, driver.inline_runs
        rows = (await conn.execute(text("SELECT 1 UNION ALL SELECT 2"))).all()
        assert (driver.trips, driver.inline_runs) == (trips, inline + 1)
    assert [tuple(row) for row in rows] == [(1,), (2,)]
    # Back in the pool (whose reset is a rollback) and out again: no transaction, no work.
    async with engine.connect() as conn:
        assert await driver_of(conn) is driver
        assert (driver.trips, driver.inline_runs) == (trips, inline + 1)


async def test_a_write_transaction_is_a_job_per_statement_plus_the_commit(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as conn:
        await conn.execution_options(**WRITE)
        driver = await driver_of(conn)
        trips, inline = driver.trips, driver.inline_runs
        async with conn.begin():
            await conn.execute(NOTES.insert().values(body="a"))
            await conn.execute(NOTES.insert().values(body="b"))
        # BEGIN IMMEDIATE rode with the first INSERT; nothing waited, nothing left the loop.
        assert (driver.trips, driver.inline_runs) == (trips, inline + 3)
        assert not driver.in_transaction
        async with conn.begin():
            pass  # a transaction without statements never reaches SQLite
        assert driver.inline_runs == inline + 3


async def test_the_loop_never_waits_for_a_lock_the_thread_does(
    engine: AsyncEngine, path: Path
) -> None:
    """SQLite's busy timeout is 0 where the loop runs a statement; a writer that finds the
    file locked by another process waits on its connection's thread, with the configured
    patience, while the loop goes on serving other connections."""
    async with engine.connect() as conn:
        driver = await driver_of(conn)
        assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 0
    assert driver.patience_ms == 10_000

    async def write() -> None:
        async with engine.connect() as conn:
            await conn.execution_options(**WRITE)
            async with conn.begin():
                await conn.execute(NOTES.insert().values(body="after the lock"))

    with other_writer(path) as other:
        other.execute("INSERT INTO notes (body) VALUES ('held')")
        waiting = asyncio.create_task(write())
        for _ in range(20):  # the loop keeps serving reads meanwhile
            async with engine.connect() as reader:
                await reader.execution_options(**ONE_STATEMENT)
                assert (await reader.execute(select(NOTES.c.id))).all() == []
        assert not waiting.done()
    await waiting
    async with engine.connect() as conn:
        bodies = (await conn.execute(select(NOTES.c.body).order_by(NOTES.c.id))).scalars()
        assert list(bodies) == ["held", "after the lock"]


# ------------------------------------------------------------------ transactions and locks


async def test_begin_immediate_holds_the_write_lock_before_the_first_statement_returns(
    engine: AsyncEngine, path: Path
) -> None:
    async with engine.connect() as conn:
        await conn.execution_options(**WRITE)
        async with conn.begin():
            assert write_lock_is_free(path)  # nothing has reached SQLite yet
            await conn.execute(select(NOTES.c.id))  # a read, yet the lock is taken
            assert not write_lock_is_free(path)
        assert write_lock_is_free(path)


async def test_a_deferred_begin_reads_one_snapshot(engine: AsyncEngine, path: Path) -> None:
    async with engine.connect() as conn, conn.begin():
        first = (await conn.execute(select(NOTES.c.id))).all()
        with other_writer(path) as other:
            other.execute("INSERT INTO notes (body) VALUES ('from elsewhere')")
        second = (await conn.execute(select(NOTES.c.id))).all()
    assert first == second == []


async def test_a_failed_statement_inside_a_transaction_rolls_it_back(
    engine: AsyncEngine, path: Path
) -> None:
    async def insert_then_fail(conn: AsyncConnection) -> None:
        async with conn.begin():
            await conn.execute(NOTES.insert().values(body="kept?"))
            await conn.execute(text("INSERT INTO missing VALUES (1)"))

    async with engine.connect() as conn:
        await conn.execution_options(**WRITE)
        with pytest.raises(OperationalError, match="no such table") as caught:
            await insert_then_fail(conn)
        assert isinstance(caught.value.orig, sqlite3.OperationalError)
        assert not (await driver_of(conn)).in_transaction
    assert write_lock_is_free(path)
    async with engine.connect() as conn:
        assert (await conn.execute(select(NOTES.c.body))).all() == []


async def test_constraint_errors_are_sqlalchemy_integrity_errors(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(NOTES.insert().values(id=1, body="a"))
    with pytest.raises(IntegrityError) as caught:
        async with engine.begin() as conn:
            await conn.execute(NOTES.insert().values(id=1, body="b"))
    assert isinstance(caught.value.orig, sqlite3.IntegrityError)


async def test_a_second_writer_waits_for_the_first_to_commit(
    engine: AsyncEngine, path: Path
) -> None:
    async def write() -> None:
        async with engine.connect() as conn:
            await conn.execution_options(**WRITE)
            async with conn.begin():
                await conn.execute(NOTES.insert().values(body="second"))

    with other_writer(path) as other:
        other.execute("INSERT INTO notes (body) VALUES ('first')")
        waiting = asyncio.create_task(write())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # in SQLite's busy handler, not failed
    await waiting
    async with engine.connect() as conn:
        bodies = (await conn.execute(select(NOTES.c.body).order_by(NOTES.c.id))).scalars()
        assert list(bodies) == ["first", "second"]


async def test_a_database_locked_past_the_busy_timeout_is_storage_unavailable(
    path: Path,
) -> None:
    url = f"sqlite:///{path}"
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url, busy_timeout_ms=50))
    sender = Sender(id=7, name="Alice")
    record = NewRecord(body=UserRecord(sender=sender, text="hi"), created_at=datetime.now(UTC))
    try:
        session = await store.open_session(SessionKey(chat_id=7), scene="private")
        with other_writer(path), pytest.raises(StorageUnavailable, match="database is locked"):
            await store.append(session.id, [record])
        assert write_lock_is_free(path)
        await store.append(session.id, [record])  # the pool's connection is fine afterwards
    finally:
        await store.close()


async def test_a_cancelled_statement_is_still_rolled_back(path: Path) -> None:
    setup = sqlite3.connect(path)
    setup.execute("CREATE TABLE t (x)")
    setup.close()
    opener = partial(sqlite3.connect, path, isolation_level=None, check_same_thread=True)
    conn = await sqlite_driver.connect(opener)
    try:
        cursor = conn.cursor()
        await cursor.execute("BEGIN IMMEDIATE")
        statement = asyncio.create_task(cursor.execute("INSERT INTO t VALUES (1)"))
        await asyncio.sleep(0)  # handed to the thread
        statement.cancel()
        with pytest.raises(asyncio.CancelledError):
            await statement
        await conn.rollback()  # must reach SQLite, though its answer may not be back yet
        assert not conn.in_transaction
        assert write_lock_is_free(path)
        await cursor.execute("SELECT count(*) FROM t")
        assert await cursor.fetchall() == [(0,)]
    finally:
        await conn.close()


# ------------------------------------------------------------------ what SQLAlchemy uses


async def test_executemany_lastrowid_and_the_dialects_functions(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        many = await conn.execute(NOTES.insert(), [{"body": "alpha"}, {"body": "beta"}])
        assert many.rowcount == 2
        one = await conn.exec_driver_sql("INSERT INTO notes (body) VALUES ('gamma')")
        assert one.lastrowid == 3
        # `regexp` is registered by SQLAlchemy's pysqlite dialect with create_function.
        matched = await conn.execute(
            select(NOTES.c.body).where(column("body").regexp_match("^[ab]"))
        )
        assert sorted(matched.scalars()) == ["alpha", "beta"]


async def test_streamed_results_arrive_whole(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(NOTES.insert(), [{"body": f"note {n}"} for n in range(250)])
    async with engine.connect() as conn:
        streamed = await conn.stream(select(NOTES.c.body).order_by(NOTES.c.id))
        first = await streamed.fetchmany(100)
        rest = [body async for body in streamed.scalars()]
    assert [row.body for row in first] + rest == [f"note {n}" for n in range(250)]


async def test_a_cursor_hands_out_its_rows_once_in_order(path: Path) -> None:
    conn = await sqlite_driver.connect(partial(sqlite3.connect, path))
    try:
        cursor = await conn.cursor().execute(
            "WITH RECURSIVE n(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM n WHERE v < 6) "
            "SELECT v FROM n"
        )
        assert await cursor.fetchone() == (1,)
        assert await cursor.fetchmany(2) == [(2,), (3,)]
        assert [row async for row in cursor] == [(4,), (5,), (6,)]
        assert await cursor.fetchall() == []
        again = await conn.cursor().execute("SELECT 7")
        assert await again.fetchall() == [(7,)]
        assert await again.fetchone() is None
    finally:
        await conn.close()


async def test_a_connection_bound_to_its_thread_runs_every_job_there(path: Path) -> None:
    """An opener that keeps sqlite3's same-thread check gets the thread for everything,
    with its own busy timeout (nothing else may touch it)."""
    conn = await sqlite_driver.connect(partial(sqlite3.connect, path, timeout=3))
    try:
        trips = conn.trips
        assert await (await conn.cursor().execute("PRAGMA busy_timeout")).fetchall() == [(3000,)]
        assert (conn.trips, conn.inline_runs, conn.patience_ms) == (trips + 1, 0, 0)
    finally:
        await conn.close()


async def test_autocommit_connections_work(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(NOTES.insert().values(body="at once"))
    async with engine.connect() as conn:
        assert (await conn.execute(select(NOTES.c.body))).scalars().all() == ["at once"]


async def test_an_in_memory_database_keeps_its_one_connection() -> None:
    engine = create_engine_for("sqlite://")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(NOTES.metadata.create_all)
            await conn.execute(NOTES.insert().values(body="kept"))
        async with engine.connect() as conn:
            assert (await conn.execute(select(NOTES.c.body))).scalars().all() == ["kept"]
    finally:
        await engine.dispose()


# ------------------------------------------------------------------ threads


async def test_dispose_ends_every_connection_thread(path: Path) -> None:
    before = driver_threads()
    engine = create_engine_for(f"sqlite:///{path}")
    all_in = asyncio.Barrier(4)

    async def hold_a_connection() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            await all_in.wait()

    await asyncio.gather(*(hold_a_connection() for _ in range(4)))
    assert len(driver_threads() - before) == 4
    await engine.dispose()
    assert driver_threads() - before == set()


async def test_a_connection_dropped_unclosed_ends_its_thread(path: Path) -> None:
    before = driver_threads()
    conn = await sqlite_driver.connect(partial(sqlite3.connect, path))
    (thread,) = driver_threads() - before
    del conn
    gc.collect()
    thread.join(timeout=deadline(EVENT))
    assert not thread.is_alive()


async def test_a_failed_open_ends_its_thread(tmp_path: Path) -> None:
    before = driver_threads()
    missing = tmp_path / "no" / "such" / "dir" / "x.sqlite3"
    with pytest.raises(sqlite3.OperationalError):
        await sqlite_driver.connect(partial(sqlite3.connect, missing))
    assert driver_threads() - before == set()


async def test_a_closed_connection_refuses_work(path: Path) -> None:
    conn = await sqlite_driver.connect(partial(sqlite3.connect, path))
    await conn.close()
    await conn.close()  # again: nothing
    for statement in ("SELECT 1", "BEGIN"):
        with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
            await conn.cursor().execute(statement)


async def test_connections_opening_together_on_a_new_file_all_get_wal(tmp_path: Path) -> None:
    """The switch to WAL needs the file to itself, and SQLite refuses it at once ("database
    is locked") while another connection is switching: connections opened at the same moment
    on a new file (a fresh bot's first burst) wait for each other instead of failing."""
    for attempt in range(20):
        engine = create_engine_for(f"sqlite:///{tmp_path / f'new-{attempt}.sqlite3'}")

        async def journal_mode(engine: AsyncEngine = engine) -> str:
            async with engine.connect() as conn:
                return str((await conn.execute(text("PRAGMA journal_mode"))).scalar_one())

        try:
            modes = await asyncio.gather(*(journal_mode() for _ in range(8)))
        finally:
            await engine.dispose()
        assert modes == ["wal"] * 8


# SQLAlchemy's `sqlite+aiosqlite` adapter drives our connection as it drives aiosqlite's,
# reading some private attributes of aiosqlite's (docs/architecture.md, The SQLite driver).
# These pin what it reads to what `sqlite_driver.Connection` and `Cursor` provide, and the
# installed versions to `pyproject.toml`'s ranges: an upgrade that reads something else fails
# here, naming it, instead of at run time.
ADAPTERS = (
    "sqlalchemy.dialects.sqlite.aiosqlite:AsyncAdapt_aiosqlite_connection",
    "sqlalchemy.dialects.sqlite.aiosqlite:AsyncAdapt_aiosqlite_cursor",
    "sqlalchemy.connectors.asyncio:AsyncAdapt_dbapi_connection",
    "sqlalchemy.connectors.asyncio:AsyncAdapt_dbapi_cursor",
)


def _read_by_adapters(pattern: str) -> set[str]:
    names: set[str] = set()
    for where in ADAPTERS:
        module, _, cls = where.partition(":")
        source = inspect.getsource(getattr(importlib.import_module(module), cls))
        names |= set(re.findall(pattern, source))
    return names


def test_what_sqlalchemys_adapter_reads_of_the_connection_is_there() -> None:
    read = _read_by_adapters(r"self\._connection\.(\w+)") | {"cursor"}
    assert read >= {"_conn", "_connection", "_tx"}  # the private ones this module imitates
    missing = {name for name in read if not hasattr(sqlite_driver.Connection, name)}
    assert not missing, f"SQLAlchemy's adapter now reads {sorted(missing)} of the connection"
    assert hasattr(sqlite_cursor.AdapterQueue, "put_nowait")  # `_tx.put_nowait((future, fn))`


def test_what_sqlalchemys_adapter_reads_of_a_cursor_is_there() -> None:
    read = _read_by_adapters(r"self\._cursor\.(\w+)") - {"nextset"}  # only when asked for
    missing = {name for name in read if not hasattr(sqlite_cursor.Cursor, name)}
    assert not missing, f"SQLAlchemy's adapter now reads {sorted(missing)} of a cursor"


@pytest.mark.parametrize("package", ["sqlalchemy", "aiosqlite"])
def test_the_installed_driver_packages_are_the_pinned_ones(package: str) -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    dependencies = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    (pinned,) = (r for r in map(Requirement, dependencies) if r.name == package)
    assert pinned.specifier.contains(version(package)), (package, version(package), pinned)


async def test_the_adapters_isolation_level_setter_runs_on_the_connection(
    engine: AsyncEngine,
) -> None:
    """The setter puts `(future, fn)` on `_tx` with `fn` bound to `_conn`: SQLAlchemy calls
    it to take an AUTOCOMMIT connection back to the pool's level."""
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        driver = await driver_of(conn)
        adapter = conn.sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
        await conn.run_sync(lambda _sync: setattr(adapter, "isolation_level", "DEFERRED"))
        assert driver.isolation_level == "DEFERRED"
        await conn.run_sync(lambda _sync: setattr(adapter, "isolation_level", None))
        assert driver.isolation_level is None
