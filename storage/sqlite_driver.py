"""SQLite for the store: the connection under SQLAlchemy, its `BEGIN`, the writer queue, whole jobs.

The connection is an asyncio one for SQLAlchemy's aiosqlite dialect, run on the event loop
itself unless it must wait for a lock (below); `on_begin` picks the `BEGIN` of each
transaction from the connection's execution options; `WriteGate` queues this process's
writers before they take a connection.

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

Whole jobs. Beyond SQLAlchemy's protocol, `run` and `run_transaction` take a whole job (a
function of the `sqlite3` connection) for callers that know every statement up front: a
write transaction (`BEGIN IMMEDIATE`, its statements, `COMMIT`) is then one job instead of
one per statement plus the commit. `FastSqlite` runs the statements of every answered
message so, without SQLAlchemy's per-statement path (a greenlet switch, the compiled-cache
lookup, parameter processing, a `Row` per row):

- each statement is compiled once (`Prepared`) for the engine's dialect: its SQL text, its
  positional parameters with SQLAlchemy's own bind processors (a `DateTime` is stored as
  SQLAlchemy stores it), and its result columns with SQLAlchemy's own result processors, so
  the values read back are the ones `conn.execute(...)` would give, as named tuples;
- a read (`FastSqlite.read`) or a write transaction (`FastSqlite.write`) is one job. A
  failing statement rolls the transaction back; its `sqlite3` error surfaces as
  `StorageUnavailable`, as through SQLAlchemy. Writers queue on the store's `WriteGate`
  first, as every SQLite writer of the store does. A job handed to the thread (it waits
  there for another process's lock) runs to its end (its `COMMIT` or `ROLLBACK`) even if
  its caller is cancelled meanwhile, and the connection goes back to the pool after it;
- the connection still comes from the engine's pool (its size, its reset on return, which
  is answered without running anything when no transaction is open, and `dispose`).
  PostgreSQL never comes here: the store keeps SQLAlchemy's path for it.

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
from collections import namedtuple
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import suppress
from functools import partial
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.dml import Insert

from bot.errors import StorageUnavailable
from storage.plan import Plan, Rows

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection as EngineConnection

Row: TypeAlias = tuple[Any, ...]
Description: TypeAlias = tuple[tuple[Any, ...], ...] | None
Opener: TypeAlias = Callable[[], sqlite3.Connection]
Setup: TypeAlias = Callable[[sqlite3.Connection], None]

_BEGINS = frozenset(
    f"BEGIN{kind}{word}"
    for kind in ("", " DEFERRED", " IMMEDIATE", " EXCLUSIVE")
    for word in ("", " TRANSACTION")
)
_CLOSED = "Cannot operate on a closed database."
"""sqlite3's own words, which SQLAlchemy's pysqlite dialect reads as a disconnect."""


class _Thread:
    """What jobs run against: the sqlite3 connection, once opened (on the worker thread),
    and the busy timeout the thread waits with for a lock (`patience_ms`, set when the
    event loop runs jobs itself: see `Connection._run`)."""

    __slots__ = ("conn", "patience_ms")

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.patience_ms = 0

    def open(self) -> sqlite3.Connection:
        if self.conn is None:
            raise sqlite3.ProgrammingError(_CLOSED)
        return self.conn


T = TypeVar("T")
Work: TypeAlias = Callable[[_Thread], Any]
Settle: TypeAlias = Callable[[bool, Any, bool], None]
Job: TypeAlias = tuple[asyncio.AbstractEventLoop, Settle, Work] | None


def _serve(jobs: SimpleQueue[Job], here: _Thread) -> None:
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


def _open(opener: Opener, setup: Setup | None) -> Work:
    def work(here: _Thread) -> sqlite3.Connection:
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


def _statement(operation: str, parameters: Any) -> Work:
    def work(here: _Thread) -> tuple[Description, int, int | None, list[Row]]:
        cursor = here.open().execute(operation, () if parameters is None else parameters)
        try:
            description = cursor.description
            rows = cursor.fetchall() if description is not None else []
            return description, cursor.rowcount, cursor.lastrowid, rows
        finally:
            cursor.close()

    return work


def _begun(begin: str, work: Work) -> Work:
    def begun(here: _Thread) -> Any:
        here.open().execute(begin)
        return work(here)

    return begun


def _statements(operation: str, seq_of_parameters: Iterable[Any]) -> Work:
    def work(here: _Thread) -> tuple[int, int | None]:
        cursor = here.open().executemany(operation, seq_of_parameters)
        try:
            return cursor.rowcount, cursor.lastrowid
        finally:
            cursor.close()

    return work


def _plain(work: Callable[[sqlite3.Connection], T]) -> Callable[[_Thread], T]:
    def plain(here: _Thread) -> T:
        return work(here.open())

    return plain


def _transaction(begin: str, work: Callable[[sqlite3.Connection], T]) -> Callable[[_Thread], T]:
    def transaction(here: _Thread) -> T:
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


def _commit(here: _Thread) -> None:
    here.open().commit()


def _rollback(here: _Thread) -> None:
    here.open().rollback()


def _close(here: _Thread) -> None:
    if here.conn is not None:
        here.conn.close()
        here.conn = None


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
        self._here = _Thread()
        self._thread = threading.Thread(
            target=_serve, args=(self._jobs, self._here), name="tgbot-sqlite", daemon=True
        )
        self._inline = False
        """Whether the event loop runs jobs itself (see `_run`)."""
        self._connection: sqlite3.Connection | None = None
        self._begin: str | None = None
        self._in_transaction = False
        self._pending = 0
        self._stopped = False
        self._tx = _AdapterQueue(self)
        self.trips = 0
        """Jobs handed to the thread so far (each one trip there and back)."""
        self.inline_runs = 0
        """Jobs the event loop ran itself."""
        # Dropped without close(): the thread still ends (it holds the queue, not us).
        weakref.finalize(self, self._jobs.put, None)

    async def _start(self, opener: Opener, setup: Setup | None) -> Connection:
        self._thread.start()
        try:
            self._connection = await self._run(_open(opener, setup))
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
            raise sqlite3.ProgrammingError(_CLOSED)
        begun = self._begin is not None
        if self._begin is not None:
            work, self._begin = _begun(self._begin, work), None
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
            await self._run(_commit)

    async def rollback(self) -> None:
        if not self._end_held():
            await self._run(_rollback)

    # -- whole jobs, for callers that know every statement they will run

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(conn)` as one job (see `_run`): each statement it runs outside a
        transaction is its own (one read is one snapshot)."""
        answer: T = await self._run(_plain(work))
        return answer

    async def run_transaction(
        self, work: Callable[[sqlite3.Connection], T], *, begin: str = "BEGIN IMMEDIATE"
    ) -> T:
        """`begin`, `work(conn)` and `COMMIT` as one job (see `_run`); if `work` or the
        commit raises, the transaction is rolled back and the error (the `sqlite3` one, or
        whatever `work` raised) is raised here. A transaction already open makes `begin` fail
        (sqlite3's "cannot start a transaction within a transaction")."""
        answer: T = await self._run(_transaction(begin, work))
        return answer

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        await self._run(lambda here: here.open().create_function(*args, **kwargs))

    async def close(self) -> None:
        """Close the connection and end its thread (again: nothing)."""
        if self._stopped:
            return
        closing = self._run(_close)
        self.stop()
        try:
            await closing
        finally:
            # The thread has answered its last job and is leaving `_serve`.
            self._thread.join()

    def stop(self) -> None:
        """End the thread after the work already queued, without waiting (any thread may call)."""
        if not self._stopped:
            self._stopped = True
            self._connection = None
            self._begin = None
            self._jobs.put(None)

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


class _AdapterQueue:
    """`_tx` for the adapter's `isolation_level` setter: runs `function()` on the thread."""

    __slots__ = ("_owner",)

    def __init__(self, owner: Connection) -> None:
        self._owner = weakref.proxy(owner)

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, function = item
        self._owner._submit(future, lambda _here: function())


class Cursor:
    """A statement's answer, fetched whole in the one hop that ran it."""

    __slots__ = (
        "_connection",
        "_next",
        "_rows",
        "arraysize",
        "description",
        "lastrowid",
        "rowcount",
    )

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._rows: list[Row] = []
        self._next = 0
        """The index of the next row to hand out (fetching one at a time is O(1))."""
        self.description: Description = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    async def __aenter__(self) -> Cursor:
        return self

    def __await__(self) -> Generator[Any, None, Cursor]:
        # SQLAlchemy 2.0's adapter awaits `connection.cursor()`; 2.1's enters it.
        return self.__aenter__().__await__()

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def execute(self, operation: str, parameters: Any = None) -> Cursor:
        if self._connection._hold_begin(operation, parameters):
            self.description, self.rowcount = None, -1
            self._rows, self._next = [], 0
            return self
        answer = await self._connection._run(_statement(operation, parameters))
        self.description, self.rowcount, self.lastrowid, self._rows = answer
        self._next = 0
        return self

    async def executemany(self, operation: str, seq_of_parameters: Iterable[Any]) -> Cursor:
        self.rowcount, self.lastrowid = await self._connection._run(
            _statements(operation, seq_of_parameters)
        )
        self.description, self._rows, self._next = None, [], 0
        return self

    async def fetchone(self) -> Row | None:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    async def fetchmany(self, size: int | None = None) -> Sequence[Row]:
        count = self.arraysize if size is None else size
        taken = self._rows[self._next : self._next + count]
        self._next += len(taken)
        return taken

    async def fetchall(self) -> Sequence[Row]:
        taken = self._rows if self._next == 0 else self._rows[self._next :]
        self._rows, self._next = [], 0
        return taken

    async def close(self) -> None:
        self._rows, self._next = [], 0

    async def setinputsizes(self, *_sizes: Any) -> None:
        return None

    def setoutputsize(self, *_args: Any) -> None:
        return None

    async def __aiter__(self) -> AsyncIterator[Row]:
        while (row := await self.fetchone()) is not None:
            yield row


async def connect(opener: Opener, *, setup: Setup | None = None) -> Connection:
    """A connection whose thread runs `opener()` and then `setup(conn)` before anything else."""
    return await Connection()._start(opener, setup)


# ---------------------------------------------------------------- transactions and writers

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


# ---------------------------------------------------------------- whole jobs, without SQLAlchemy

STATEMENT_LISTENERS: list[Callable[[str], None]] = []
"""Called with each statement's SQL as it runs here, on the connection's thread (for
`bench.bench_trips`, which counts statements; SQLAlchemy's events do not see these)."""
_DRIVEN: weakref.WeakSet[Any] = weakref.WeakSet()
"""The (sync) engines whose connections are this module's ones."""


def mark_driven(engine: AsyncEngine) -> AsyncEngine:
    """Note that `engine`'s connections come from `connect`."""
    _DRIVEN.add(engine.sync_engine)
    return engine


def for_engine(engine: AsyncEngine, gate: WriteGate | None) -> FastSqlite | None:
    """The fast path of a SQLite engine driven by this module's (else None: the
    store keeps SQLAlchemy's path, as for PostgreSQL or a plain aiosqlite engine)."""
    if gate is None or engine.sync_engine not in _DRIVEN:
        return None
    return FastSqlite(engine, gate)


class Prepared:
    """One statement compiled for SQLite, run on a `sqlite3` connection (on its thread)."""

    __slots__ = ("_columns", "_processors", "_row", "_spec", "sql")

    def __init__(
        self, statement: Any, dialect: Dialect, column_keys: Sequence[str] | None = None
    ) -> None:
        compiled = statement.compile(
            dialect=dialect, column_keys=None if column_keys is None else list(column_keys)
        )
        if compiled.positiontup is None or compiled.post_compile_params:
            raise ValueError("only statements with plain positional parameters are prepared")
        self.sql = str(compiled)
        processors = compiled._bind_processors
        spec: list[tuple[str | None, Any, Callable[[Any], Any] | None]] = []
        for name in compiled.positiontup:
            bind = compiled.binds[name]
            process = processors.get(name)
            if bind.required:
                spec.append((name, None, process))
            else:  # a literal SQLAlchemy made a parameter (`LIMIT 1`, a constant)
                value = bind.effective_value
                spec.append((None, value if process is None else process(value), None))
        self._spec = tuple(spec)
        columns = compiled._result_columns
        self._columns = tuple(column[0] for column in columns)
        self._row: Any = namedtuple("Row", self._columns) if columns else None
        self._processors = tuple(
            (index, process)
            for index, column in enumerate(columns)
            if (process := column[3]._cached_result_processor(dialect, None)) is not None
        )

    def params(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for named `values` (bind processors applied)."""
        out: list[Any] = []
        for name, fixed, process in self._spec:
            if name is None:
                out.append(fixed)
            else:
                value = values[name]
                out.append(value if process is None else process(value))
        return tuple(out)

    def rows(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> list[Any]:
        """Every row of the statement, as SQLAlchemy would convert them, as named tuples."""
        raw = self._execute(conn, values).fetchall()
        make = self._row._make
        processors = self._processors
        if not processors:
            return [make(row) for row in raw]
        converted: list[Any] = []
        for row in raw:
            values_ = list(row)
            for index, process in processors:
                values_[index] = process(values_[index])
            converted.append(make(values_))
        return converted

    def first(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> Any:
        """The first row (None without one)."""
        rows = self.rows(conn, values)
        return rows[0] if rows else None

    def scalar(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> Any:
        """The first column of the first row (None without one)."""
        rows = self._execute(conn, values).fetchall()  # stepped to its end
        if not rows:
            return None
        value = rows[0][0]
        if self._processors and self._processors[0][0] == 0:
            value = self._processors[0][1](value)
        return value

    def run(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> None:
        self._execute(conn, values)

    def run_many(self, conn: sqlite3.Connection, values: Iterable[Mapping[str, Any]]) -> None:
        """The statement once per parameter set, in one `executemany`."""
        self._noted()
        conn.executemany(self.sql, [self.params(one) for one in values])

    def _execute(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> sqlite3.Cursor:
        self._noted()
        return conn.execute(self.sql, self.params(values))

    def _noted(self) -> None:
        for listener in STATEMENT_LISTENERS:
            listener(self.sql)


class FastSqlite:
    """Jobs of a SQLite store, one driver job each (see "Whole jobs" in the module doc)."""

    __slots__ = ("_dialect", "_engine", "_gate", "_prepared")

    def __init__(self, engine: AsyncEngine, gate: WriteGate) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._gate = gate
        self._prepared: dict[tuple[int, tuple[str, ...] | None], tuple[Any, Prepared]] = {}

    def prepared(self, statement: Any, column_keys: Sequence[str] | None = None) -> Prepared:
        """`statement` compiled once (kept with it: its id is the key)."""
        key = (id(statement), None if column_keys is None else tuple(column_keys))
        known = self._prepared.get(key)
        if known is None or known[0] is not statement:
            known = (statement, Prepared(statement, self._dialect, column_keys))
            self._prepared[key] = known
        return known[1]

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on a pooled connection, outside a transaction (one statement reads one
        snapshot)."""
        return await self._job(lambda driver: driver.run(work), "read")

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one write transaction (`BEGIN IMMEDIATE` … `COMMIT`), as one job;
        whatever it raises rolls everything back (a `sqlite3` error as `StorageUnavailable`)."""
        async with self._gate.hold():
            return await self._job(lambda driver: driver.run_transaction(work), "write")

    async def write_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """Run a write plan (`storage.plan`; made afresh by `plan`, as a job may run again
        on the thread) in one write transaction, as one job: this is its `sqlite3` executor."""
        return await self.write(partial(self._drive, plan))

    def _drive(self, plan_of: Callable[[], Plan[T]], conn: sqlite3.Connection) -> T:
        plan = plan_of()
        answer: Any = None
        try:
            while True:
                step = plan.send(answer)
                # an INSERT's columns are the keys of its parameters
                if isinstance(step, Rows):
                    keys = tuple(step.params) if isinstance(step.statement, Insert) else None
                    answer = self.prepared(step.statement, keys).rows(conn, step.params)
                else:
                    keys = tuple(step.params[0]) if isinstance(step.statement, Insert) else None
                    self.prepared(step.statement, keys).run_many(conn, step.params)
                    answer = None
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            plan.close()

    async def _job(self, run: Callable[[Connection], Awaitable[T]], what: str) -> T:
        try:
            async with self._engine.connect() as conn:
                try:
                    return await run(_driver(conn))
                except sqlite3.Error as exc:
                    await _drop_if_closed(conn, exc)
                    raise
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise StorageUnavailable(f"database {what} failed: {exc}") from exc


def _driver(conn: AsyncConnection) -> Connection:
    """The driver connection under a connection just taken from the pool (no I/O: the pool
    has connected it already)."""
    driver = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
    if not isinstance(driver, Connection):
        raise TypeError(f"not a storage.sqlite_driver connection: {driver!r}")
    return driver


async def _drop_if_closed(conn: AsyncConnection, exc: sqlite3.Error) -> None:
    """A closed connection leaves the pool, as SQLAlchemy's disconnect check would have it."""
    if isinstance(exc, sqlite3.ProgrammingError) and _CLOSED in str(exc):
        await conn.invalidate()
