"""A SQLite connection's worker thread and the work it runs (`storage.sqlite.driver`'s jobs).

The thread opens the connection, runs every job handed to it in order, and waits for
another process's lock with the connection's busy timeout (`Worker.patience_ms`). The work
SQLAlchemy's adapter hands it (statements, a held `BEGIN`, commit, rollback) is
`storage.sqlite.adapter_work`'s; the whole jobs (`plain`, `transaction`) are here.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from contextlib import suppress
from queue import SimpleQueue
from typing import Any, TypeAlias, TypeVar

Row: TypeAlias = tuple[Any, ...]
Description: TypeAlias = tuple[tuple[Any, ...], ...] | None
Opener: TypeAlias = Callable[[], sqlite3.Connection]
Setup: TypeAlias = Callable[[sqlite3.Connection], None]

CLOSED = "Cannot operate on a closed database."
"""sqlite3's own words, which SQLAlchemy's pysqlite dialect reads as a disconnect."""


class Worker:
    """What jobs run against: the sqlite3 connection, once opened (on the worker thread),
    and the busy timeout the thread waits with for a lock (`patience_ms`, set when the
    event loop runs jobs itself: see `Connection._run`)."""

    __slots__ = ("conn", "patience_ms")

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.patience_ms = 0

    def open(self) -> sqlite3.Connection:
        if self.conn is None:
            raise sqlite3.ProgrammingError(CLOSED)
        return self.conn


T = TypeVar("T")
Work: TypeAlias = Callable[[Worker], Any]
Settle: TypeAlias = Callable[[bool, Any, bool], None]
Job: TypeAlias = tuple[asyncio.AbstractEventLoop, Settle, Work] | None


def serve(jobs: SimpleQueue[Job], here: Worker) -> None:
    """The worker thread: run jobs in order until a `None` arrives, then close. A job here
    may wait for a lock as long as the connection was set up to (`patience_ms`)."""
    try:
        while (job := jobs.get()) is not None:
            loop, settle, work = job
            patient = here.patience_ms > 0 and here.conn is not None
            try:
                if patient:
                    here.open().execute(f"PRAGMA busy_timeout={here.patience_ms}")
                ok, value = True, work(here)
            except BaseException as exc:  # handed to the awaiting task, whatever it is
                ok, value = False, exc
            if patient and here.conn is not None:
                with suppress(sqlite3.Error):
                    here.conn.execute("PRAGMA busy_timeout=0")
            in_transaction = here.conn is not None and here.conn.in_transaction
            with suppress(RuntimeError):  # the loop is closed: nobody waits for this answer
                loop.call_soon_threadsafe(settle, ok, value, in_transaction)
            del job, settle, work, value
    finally:
        if here.conn is not None:
            here.conn.close()
            here.conn = None


# --------------------------------------------------------------- work run on the thread


def opening(opener: Opener, setup: Setup | None) -> Work:
    def work(here: Worker) -> sqlite3.Connection:
        conn = opener()
        try:
            if setup is not None:
                setup(conn)
        except BaseException:
            conn.close()
            raise
        here.conn = conn
        return conn

    return work


def plain(work: Callable[[sqlite3.Connection], T]) -> Callable[[Worker], T]:
    def plain(here: Worker) -> T:
        return work(here.open())

    return plain


def transaction(begin: str, work: Callable[[sqlite3.Connection], T]) -> Callable[[Worker], T]:
    def transaction(here: Worker) -> T:
        conn = here.open()
        conn.execute(begin)
        try:
            result = work(conn)
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        return result

    return transaction


def close(here: Worker) -> None:
    if here.conn is not None:
        here.conn.close()
        here.conn = None
