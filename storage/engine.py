"""The async engine for a database URL: SQLite tuned for a bot, or PostgreSQL (asyncpg).

SQLite runs under SQLAlchemy's `sqlite+aiosqlite` dialect, but its connections come from
`storage.sqlite.driver` (statements run on the event loop; a connection's own thread opens
it and waits for locks) rather than from aiosqlite. They get WAL, `foreign_keys=ON`, a busy
timeout and `synchronous=NORMAL`, set as the connection opens. Each transaction's `BEGIN`
is chosen by `storage.sqlite.jobs.on_begin`: `BEGIN IMMEDIATE` for a connection marked with the
`WRITE` execution options, none for one marked `ONE_STATEMENT`, a plain one otherwise.
"""

from __future__ import annotations

import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.reconnect import POOL_RECYCLE_SECONDS
from storage.sqlite import driver as sqlite_driver
from storage.sqlite import jobs as sqlite_jobs

BUSY_TIMEOUT_MS = 10_000
SQLITE_POOL_SIZE = 15
POSTGRES_POOL_SIZE = 15
WRITE: dict[str, Any] = {sqlite_jobs.WRITE_OPTION: True}
"""Execution options of a connection that will write (SQLite: `BEGIN IMMEDIATE`)."""
ONE_STATEMENT: dict[str, Any] = {sqlite_jobs.ONE_STATEMENT_OPTION: True}
"""Execution options of a connection that runs a single read (SQLite: no `BEGIN`)."""


def normalise_url(url: str) -> URL:
    """`sqlite:` and `postgresql:` / `postgres:` URLs get their async driver."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    if parsed.drivername == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if parsed.drivername == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg")
    return parsed


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def create_engine_for(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> AsyncEngine:
    """An engine for `url`; for a SQLite file, its directory is created, and a writer that
    finds the database locked waits up to `busy_timeout_ms` before it fails."""
    parsed = normalise_url(url)
    if not is_sqlite(parsed):
        # no pre-ping (a round trip per checkout): recycled, and retried on a dropped
        # connection by the store (`storage.reconnect`)
        return create_async_engine(
            parsed, pool_recycle=POOL_RECYCLE_SECONDS, pool_size=15, max_overflow=0
        )
    database = parsed.database or ""
    in_memory = database in ("", ":memory:")
    if not in_memory and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    # The URL's file name and sqlite3 options, read the way the pysqlite dialect reads them.
    args, options = parsed.get_dialect()().create_connect_args(parsed)
    # Transaction control belongs to SQLAlchemy (`sqlite_jobs.on_begin`). A connection is
    # used by the event loop and by its own thread, one at a time (`storage.sqlite.driver`).
    options.update(isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000)
    opener = partial(sqlite3.connect, *args, **options)
    # A file gets as many connections as SQLAlchemy's default pool (5 + 10 overflow), all
    # kept: under load an overflow connection is otherwise opened and closed over and over,
    # a thread, a file handle and the pragmas each time. `:memory:` has its one connection.
    pool: dict[str, Any] = {} if in_memory else {"pool_size": SQLITE_POOL_SIZE, "max_overflow": 0}
    connect = partial(
        sqlite_driver.connect, opener, setup=partial(_prepare_sqlite, busy_timeout_ms)
    )
    engine = create_async_engine(parsed, async_creator=connect, **pool)
    event.listen(engine.sync_engine, "begin", sqlite_jobs.on_begin)
    return sqlite_jobs.mark_driven(engine, connect)


def _prepare_sqlite(busy_timeout_ms: int, conn: sqlite3.Connection) -> None:
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


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL (`None`: another database, or in memory)."""
    parsed = normalise_url(url)
    if not is_sqlite(parsed):
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def create_readonly_engine(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> AsyncEngine:
    """An engine that only reads: a SQLite file is opened with `mode=ro` (no directory, file,
    journal switch or pragma write), so a missing file stays missing and a read-only volume
    works. With no `-wal` beside it (no bot writing) the file is read `immutable`, since a
    WAL reader would otherwise create `-wal` and `-shm`; a connection opened so does not see
    what a bot started later writes until the dashboard restarts. Other
    databases get the ordinary engine (the dashboard's queries only read)."""
    path = sqlite_file(url)
    if path is None:
        return create_engine_for(url, busy_timeout_ms=busy_timeout_ms)
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
    engine = create_async_engine(
        normalise_url(url), async_creator=connect, pool_size=SQLITE_POOL_SIZE, max_overflow=0
    )
    event.listen(engine.sync_engine, "begin", sqlite_jobs.on_begin)
    return sqlite_jobs.mark_driven(engine, connect)
