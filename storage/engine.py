"""The async engine for a database URL: SQLite (aiosqlite) tuned for a bot, or PostgreSQL.

SQLite connections get WAL, `foreign_keys=ON`, a busy timeout and `synchronous=NORMAL`.
SQLAlchemy, not the sqlite3 driver, emits `BEGIN`: plain (deferred) for reads and
`BEGIN IMMEDIATE` for a connection marked with the `WRITE` execution options, so two
writers queue on the busy timeout instead of failing when a read lock cannot be upgraded.
A connection marked `ONE_STATEMENT` gets no `BEGIN` at all: a single read is a consistent
snapshot on its own, and the round trip of a `BEGIN` costs about as much as the read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

BUSY_TIMEOUT_MS = 10_000
WRITE: dict[str, Any] = {"tgbot_write": True}
"""Execution options of a connection that will write (SQLite: `BEGIN IMMEDIATE`)."""
ONE_STATEMENT: dict[str, Any] = {"tgbot_one_statement": True}
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


def create_engine_for(url: str) -> AsyncEngine:
    """An engine for `url`; for a SQLite file, its directory is created."""
    parsed = normalise_url(url)
    if not is_sqlite(parsed):
        return create_async_engine(parsed, pool_pre_ping=True)
    database = parsed.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
    event.listen(engine.sync_engine, "connect", _on_sqlite_connect)
    event.listen(engine.sync_engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Hand transaction control to SQLAlchemy (see `_on_sqlite_begin`).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    options = connection.get_execution_options()
    if options.get("tgbot_write", False):
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif not options.get("tgbot_one_statement", False):
        connection.exec_driver_sql("BEGIN")


class WriteGate:
    """Queues this process's SQLite writers in order, before they take a connection.

    SQLite has one writer at a time; a second `BEGIN IMMEDIATE` waits in SQLite's busy
    handler, which polls with sleeps of up to 100 ms, and holds a pooled connection while it
    waits. Waiting here instead hands the lock over as soon as the writer before commits.
    Other processes on the same file still meet at `BEGIN IMMEDIATE` and its busy timeout.
    """

    __slots__ = ("_lock", "_loop")

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def hold(self) -> asyncio.Lock:
        """The lock of the running event loop (an asyncio lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock
