"""SQLite as the store's backend (`storage.backend.Backend`): its engine, tuned for a bot, and
its parts of the migrations.

SQLite runs under SQLAlchemy's `sqlite+aiosqlite` dialect, but its connections come from
`storage.sqlite.driver` (statements run on the event loop; a connection's own thread opens
it and waits for locks) rather than from aiosqlite. They get WAL, `foreign_keys=ON`, a busy
timeout and `synchronous=NORMAL`, set as the connection opens. Each transaction's `BEGIN`
is chosen by `on_begin`: `BEGIN IMMEDIATE` for a connection marked with the
`WRITE` execution options, none for one marked `ONE_STATEMENT`, a plain one otherwise.
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.backend import Backend
from storage.search import scope_token
from storage.sqlite import driver as sqlite_driver
from storage.sqlite.driver import Connection
from storage.sqlite.jobs import FastSqlite, OwnConnections, WriteGate
from storage.sqlite.parts import SQLITE as SQLITE_PARTS

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection as EngineConnection

POOL_SIZE = 15

WRITE_OPTION = "tgbot_write"
"""The execution option of a connection that will write (`BEGIN IMMEDIATE`)."""
ONE_STATEMENT_OPTION = "tgbot_one_statement"
"""The execution option of a connection that runs a single read (no `BEGIN`)."""


def on_begin(connection: EngineConnection) -> None:
    """The engine's `begin` listener: SQLAlchemy, not the sqlite3 driver, emits `BEGIN`.

    Plain (deferred) for reads and `BEGIN IMMEDIATE` for a connection marked `WRITE_OPTION`,
    so two writers queue on the busy timeout instead of failing when a read lock cannot be
    upgraded. A connection marked `ONE_STATEMENT_OPTION` gets no `BEGIN` at all: a single read
    is a consistent snapshot on its own, and with no transaction to end, handing the
    connection back to the pool costs no trip to its thread. An `AUTOCOMMIT` connection gets
    no `BEGIN` either."""
    options = connection.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":
        return  # every statement its own transaction, as asked
    if options.get(WRITE_OPTION, False):
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif not options.get(ONE_STATEMENT_OPTION, False):
        connection.exec_driver_sql("BEGIN")


_DRIVEN: weakref.WeakKeyDictionary[Any, OwnConnections] = weakref.WeakKeyDictionary()
"""The (sync) engines whose connections are `storage.sqlite.driver`'s, with the whole
jobs' own connections."""


def _mark_driven(engine: AsyncEngine, connect: Callable[[], Awaitable[Connection]]) -> AsyncEngine:
    """Note that `engine`'s connections come from `connect` (`storage.sqlite.driver.connect`
    with the engine's opener), which also opens the whole jobs' own connections."""
    own = OwnConnections(connect)
    _DRIVEN[engine.sync_engine] = own
    event.listen(engine.sync_engine, "engine_disposed", own.on_disposed)
    return engine


def whole_jobs(engine: AsyncEngine, gate: WriteGate | None) -> FastSqlite | None:
    """The whole jobs of a SQLite engine made here (else None: the store keeps SQLAlchemy's
    path, as for a plain aiosqlite engine)."""
    own = _DRIVEN.get(engine.sync_engine) if gate is not None else None
    if gate is None or own is None:
        return None
    return FastSqlite(engine, gate, own)


def create_engine(parsed: URL, busy_timeout_ms: int) -> AsyncEngine:
    """The engine of a SQLite URL; for a file, its directory is created, and a writer that
    finds the database locked waits up to `busy_timeout_ms` before it fails."""
    database = parsed.database or ""
    in_memory = database in ("", ":memory:")
    if not in_memory and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    # The URL's file name and sqlite3 options, read the way the pysqlite dialect reads them.
    args, options = parsed.get_dialect()().create_connect_args(parsed)
    # Transaction control belongs to SQLAlchemy (`on_begin`). A connection is
    # used by the event loop and by its own thread, one at a time (`storage.sqlite.driver`).
    options.update(isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000)
    opener = partial(sqlite3.connect, *args, **options)
    # A file gets as many connections as SQLAlchemy's default pool (5 + 10 overflow), all
    # kept: under load an overflow connection is otherwise opened and closed over and over,
    # a thread, a file handle and the pragmas each time. `:memory:` has its one connection.
    pool: dict[str, Any] = {} if in_memory else {"pool_size": POOL_SIZE, "max_overflow": 0}
    connect = partial(sqlite_driver.connect, opener, setup=partial(_prepare, busy_timeout_ms))
    engine = create_async_engine(parsed, async_creator=connect, **pool)
    event.listen(engine.sync_engine, "begin", on_begin)
    return _mark_driven(engine, connect)


def _prepare(busy_timeout_ms: int, conn: sqlite3.Connection) -> None:
    """Run on the connection's thread as it opens."""
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    _use_wal(conn, deadline=time.monotonic() + busy_timeout_ms / 1000)


def _use_wal(conn: sqlite3.Connection, *, deadline: float) -> None:
    """Switch the file to WAL (it stays so): a no-op for a file already in WAL. The switch
    needs the file to itself, and SQLite answers "database is locked" at once, without its
    busy handler, while another connection opening at the same moment reads it; so retry
    until the busy timeout."""
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def database_file(parsed: URL) -> Path | None:
    """The database file of a SQLite URL (`None`: in memory)."""
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def create_readonly_engine(parsed: URL, busy_timeout_ms: int) -> AsyncEngine:
    """An engine that only reads: a SQLite file is opened with `mode=ro` (no directory, file,
    journal switch or pragma write), so a missing file stays missing and a read-only volume
    works. With no `-wal` beside it (no bot writing) the file is read `immutable`, since a
    WAL reader would otherwise create `-wal` and `-shm`; a connection opened so does not see
    what a bot started later writes until the dashboard restarts. In memory: the ordinary
    engine."""
    path = database_file(parsed)
    if path is None:
        return create_engine(parsed, busy_timeout_ms)
    uri = path.resolve().as_uri()

    def opener() -> sqlite3.Connection:
        options: dict[str, Any] = {
            "uri": True,
            "isolation_level": None,
            "check_same_thread": False,
            "timeout": busy_timeout_ms / 1000,
        }
        # A live writer keeps `-wal` and `-shm` beside the file: share them. Without a
        # writer, a WAL reader would create both, so the file is read as it stands.
        wal = path.with_name(path.name + "-wal")
        mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        if not path.exists():
            raise sqlite3.OperationalError(f"no database file at {path}")
        conn: sqlite3.Connection = sqlite3.connect(f"{uri}?{mode}", **options)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        except sqlite3.OperationalError:
            conn.close()
            conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", **options)
        return conn

    def setup(conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA query_only=ON")

    connect = partial(sqlite_driver.connect, opener, setup=setup)
    engine = create_async_engine(parsed, async_creator=connect, pool_size=POOL_SIZE, max_overflow=0)
    event.listen(engine.sync_engine, "begin", on_begin)
    return _mark_driven(engine, connect)


class SqliteMigrations:
    """SQLite's parts of the migrations (`storage.backend.Migrations`)."""

    __slots__ = ()
    index_statement = sa.text(
        "INSERT INTO message_search(rowid, scope, body) VALUES (:id, :scope, :body)"
    )

    def create_message_search(self, op: Any) -> None:
        """An FTS5 table keyed by the event's rowid, and a trigger that drops an entry with
        its event."""
        op.execute("CREATE VIRTUAL TABLE message_search USING fts5(scope, body, tokenize='ascii')")
        op.execute(
            "CREATE TRIGGER platform_events_unindex AFTER DELETE ON platform_events "
            "BEGIN DELETE FROM message_search WHERE rowid = old.id; END"
        )

    def index_message(self, event: Any, tokens: list[str]) -> dict[str, Any]:
        scope = scope_token(event.chat_id, event.thread_id)
        return {"id": event.id, "scope": scope, "body": " ".join(tokens)}

    def drop_message_search(self, op: Any) -> None:
        op.execute("DROP TRIGGER IF EXISTS platform_events_unindex")
        op.execute("DROP TABLE IF EXISTS message_search")

    def carry_token_corrections(self, op: Any) -> None:
        """One process: the table stays empty."""


SQLITE = Backend(
    name="sqlite",
    driver="sqlite+aiosqlite",
    shared=False,
    parts=SQLITE_PARTS,
    engine=create_engine,
    readonly_engine=create_readonly_engine,
    database_file=database_file,
    jobs=whole_jobs,
    migrations=SqliteMigrations(),
)
