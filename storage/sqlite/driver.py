"""SQLite for the store: the asyncio connection SQLAlchemy's adapter drives (its cursor:
`storage.sqlite.cursor`), and the whole jobs the store runs on it.

The connection is an asyncio one for SQLAlchemy's aiosqlite dialect, run on the event loop
itself unless it must wait for a lock (below); `on_begin` picks the `BEGIN` of each
transaction from the connection's execution options and `WriteGate` queues this process's
writers before they take a connection (`storage.sqlite.backend`, `storage.sqlite.jobs`).

`create_async_engine(..., async_creator=...)` hands SQLAlchemy a driver connection; its
`sqlite+aiosqlite` adapter then awaits `cursor()`, `execute()`, `fetchall()` and `close()` on
it for every statement, and a `rollback()` whenever the pool takes a connection back. With
aiosqlite each of those is a trip to the connection's thread and back (a future, a queue put,
a wake-up of the event loop through its self-pipe, and the GIL passed twice, then fought for
while the statement runs). Here one connection runs the standard `sqlite3` module, and:

- a job (a statement, a commit...) runs on the event loop, at once, when nothing is queued
  on the connection's thread: the bot's statements take microseconds, less than the hop.
  There SQLite's busy timeout is 0, so the loop never waits for a lock: a job that finds the
  file locked by another process (SQLite answers busy at once, having done nothing) goes to
  the connection's own thread, which waits with the configured busy timeout (a `BEGIN` the
  job ran is rolled back first and runs again there). The thread also opens the connection,
  and runs every job of a connection opened with sqlite3's same-thread check;
- `execute` runs the statement and fetches every row in one job; `description`, `rowcount`
  and `lastrowid` come back with the rows, so `fetchall`, `close` and the attributes are local;
- a bare `BEGIN` (any of `BEGIN [DEFERRED|IMMEDIATE|EXCLUSIVE]`) outside a transaction is
  held here and runs just before the next statement, in the same job, so the transaction
  still starts (and `BEGIN IMMEDIATE` still takes the write lock) before its first statement
  runs; a failing `BEGIN` (say, `database is locked` after the busy timeout) is raised by that
  statement. A transaction ended before any statement never reaches SQLite;
- `commit` and `rollback` are answered here when no transaction is open and no work is queued
  (`sqlite3.Connection.in_transaction`, read after every job), which is what `sqlite3` itself
  does then: nothing;
- errors are the `sqlite3` exceptions themselves, raised where the statement is awaited, so
  SQLAlchemy maps them as it maps pysqlite's.

Besides the awaitable methods, the adapter reads three attributes of the connection:
`_connection` (truthy while open), and `_conn` with `_tx.put_nowait((future, function))` for
its `isolation_level` setter, which runs `function` on the connection's thread.

A connection that is dropped without `close()` stops its thread all the same (a weakref
finaliser); `close()` returns after the thread has ended.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

from storage.sqlite import adapter_work, worker
from storage.sqlite.cursor import AdapterQueue, Cursor
from storage.sqlite.worker import Job, Opener, Setup, Work

T = TypeVar("T")

_BEGINS = frozenset(
    f"BEGIN{kind}{word}"
    for kind in ("", " DEFERRED", " IMMEDIATE", " EXCLUSIVE")
    for word in ("", " TRANSACTION")
)


# --------------------------------------------------------------- the event loop's side


class Connection:
    """One SQLite connection and its thread, as SQLAlchemy's asyncio adapter drives it."""

    __slots__ = (
        "__weakref__",
        "_begin",
        "_connection",
        "_here",
        "_in_transaction",
        "_inline",
        "_jobs",
        "_pending",
        "_stopped",
        "_thread",
        "_tx",
        "inline_runs",
        "trips",
    )

    def __init__(self) -> None:
        self._jobs: SimpleQueue[Job] = SimpleQueue()
        self._here = worker.Worker()
        self._thread = threading.Thread(
            target=worker.serve, args=(self._jobs, self._here), name="tgbot-sqlite", daemon=True
        )
        self._inline = False
        """Whether the event loop runs jobs itself (see `_run`)."""
        self._connection: sqlite3.Connection | None = None
        self._begin: str | None = None
        self._in_transaction = False
        self._pending = 0
        self._stopped = False
        self._tx = AdapterQueue(self)
        self.trips = 0
        """Jobs handed to the thread so far (each one trip there and back)."""
        self.inline_runs = 0
        """Jobs the event loop ran itself."""
        # Dropped without close(): the thread still ends (it holds the queue, not us).
        weakref.finalize(self, self._jobs.put, None)

    async def _start(self, opener: Opener, setup: Setup | None) -> Connection:
        self._thread.start()
        try:
            self._connection = await self._run(worker.opening(opener, setup))
        except BaseException:
            self.stop()
            self._thread.join()
            raise
        self._inline = self._take_inline(self._connection)
        return self

    def _take_inline(self, conn: sqlite3.Connection) -> bool:
        """Let the event loop run jobs itself, when the connection may be used from it
        (opened with `check_same_thread=False`): it then never waits for a lock (busy
        timeout 0), and the thread keeps the configured patience for a job that must."""
        try:
            (patience,) = conn.execute("PRAGMA busy_timeout").fetchone()
            conn.execute("PRAGMA busy_timeout=0")
        except sqlite3.ProgrammingError:  # bound to the thread that opened it
            return False
        self._here.patience_ms = int(patience)
        return True

    # -- the hop to the thread

    def _run(self, work: Work) -> asyncio.Future[Any]:
        """`work`'s answer. When nothing is queued on the thread, the event loop runs it
        itself, at once: a statement takes microseconds, and a hop to the thread and back
        costs more (a queue wake-up, a self-pipe write and read, the GIL passed twice, and
        the GIL fought for while the statement runs). A job that would have to wait for a
        lock (another process writing: SQLite says busy at once, its timeout being 0 here)
        goes to the thread instead, which waits with the configured busy timeout, so the
        loop never blocks on a lock."""
        if self._stopped:
            raise sqlite3.ProgrammingError(worker.CLOSED)
        begun = self._begin is not None
        if self._begin is not None:
            work, self._begin = adapter_work.begun(self._begin, work), None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._inline and self._pending == 0 and self._here.conn is not None:
            self._run_here(future, work, begun=begun)
        else:
            self._submit(future, work)
        return future

    def _run_here(self, future: asyncio.Future[Any], work: Work, *, begun: bool) -> None:
        conn = self._here.conn
        assert conn is not None
        self.inline_runs += 1
        try:
            value = work(self._here)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY:
                future.set_exception(exc)
            else:  # wait for the lock on the thread; a BEGIN this job ran is undone first
                if begun and conn.in_transaction:
                    conn.rollback()
                self._submit(future, work)
                return
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(value)
        self._in_transaction = self._here.conn is not None and conn.in_transaction

    def _submit(self, future: asyncio.Future[Any], work: Work) -> None:
        def settle(ok: bool, value: Any, in_transaction: bool) -> None:
            # Runs on the loop even when the waiter was cancelled, so the state stays true.
            self._pending -= 1
            self._in_transaction = in_transaction
            if future.done():
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        self._pending += 1
        self.trips += 1
        self._jobs.put((future.get_loop(), settle, work))

    def _hold_begin(self, operation: str, parameters: Any) -> bool:
        """Keep a bare `BEGIN` for the next trip, if nothing could make it fail sooner."""
        if parameters or self._stopped or self._begin is not None or not self._idle():
            return False
        if " ".join(operation.upper().split()) not in _BEGINS:
            return False
        self._begin = operation
        return True

    def _idle(self) -> bool:
        """No transaction open and nothing queued: commit and rollback have nothing to do."""
        return self._pending == 0 and not self._in_transaction

    def _end_held(self) -> bool:
        """Drop a `BEGIN` that no statement followed; whether nothing is left to end."""
        self._begin = None
        return self._idle()

    # -- what SQLAlchemy's adapter calls

    def cursor(self) -> Cursor:
        return Cursor(self)

    async def execute(self, operation: str, parameters: Any = None) -> Cursor:
        """A statement on a new cursor (SQLAlchemy 2.0's adapter has this shortcut)."""
        return await Cursor(self).execute(operation, parameters)

    async def commit(self) -> None:
        if not self._end_held():
            await self._run(adapter_work.commit)

    async def rollback(self) -> None:
        if not self._end_held():
            await self._run(adapter_work.rollback)

    # -- whole jobs, for callers that know every statement they will run

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(conn)` as one job (see `_run`): each statement it runs outside a
        transaction is its own (one read is one snapshot)."""
        answer: T = await self._run(worker.plain(work))
        return answer

    async def run_transaction(
        self, work: Callable[[sqlite3.Connection], T], *, begin: str = "BEGIN IMMEDIATE"
    ) -> T:
        """`begin`, `work(conn)` and `COMMIT` as one job (see `_run`); if `work` or the
        commit raises, the transaction is rolled back and the error (the `sqlite3` one, or
        whatever `work` raised) is raised here. A transaction already open makes `begin` fail
        (sqlite3's "cannot start a transaction within a transaction")."""
        answer: T = await self._run(worker.transaction(begin, work))
        return answer

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        await self._run(lambda here: here.open().create_function(*args, **kwargs))

    async def close(self) -> None:
        """Close the connection and end its thread (again: nothing)."""
        if self._stopped:
            return
        closing = self._run(worker.close)
        self.stop()
        try:
            await closing
        finally:
            # The thread has answered its last job and is leaving `worker.serve`.
            self._thread.join()

    def stop(self) -> None:
        """End the thread after the work already queued, without waiting (any thread may call)."""
        if not self._stopped:
            self._stopped = True
            self._connection = None
            self._begin = None
            self._jobs.put(None)

    @property
    def stopped(self) -> bool:
        """Whether `stop` or `close` was called (no job runs any more)."""
        return self._stopped

    @property
    def patience_ms(self) -> int:
        """How long a job waits for another process's lock, on the thread (0: no waiting
        thread, every job runs there with the connection's own busy timeout)."""
        return self._here.patience_ms

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (or its `BEGIN` held), as of the last answer."""
        return self._in_transaction or self._begin is not None

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level  # sqlite3 lets other threads read it

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection


async def connect(opener: Opener, *, setup: Setup | None = None) -> Connection:
    """A connection whose thread runs `opener()` and then `setup(conn)` before anything else."""
    return await Connection()._start(opener, setup)
