"""SQLite's whole jobs: the writers' queue, statements compiled once, a transaction as one job.

Beyond SQLAlchemy's protocol, the connection's `run` and `run_transaction`
(`storage.sqlite.driver`) take a whole job (a function of the `sqlite3` connection) for
callers that know every statement up front: a write transaction (`BEGIN IMMEDIATE`, its
statements, `COMMIT`) is then one job instead of one per statement plus the commit.
`FastSqlite` runs the statements of every answered message so, without SQLAlchemy's
per-statement path (a greenlet switch, the compiled-cache lookup, parameter processing, a
`Row` per row):

- each statement is compiled once (`Prepared`) for the engine's dialect: its SQL text, its
  positional parameters with SQLAlchemy's own bind processors (a `DateTime` is stored as
  SQLAlchemy stores it), and its result columns with SQLAlchemy's own result processors, so
  the values read back are the ones `conn.execute(...)` would give, as named tuples;
- a read (`FastSqlite.read`) or a write transaction (`FastSqlite.write`) is one job. A
  failing statement rolls the transaction back; its `sqlite3` error surfaces as
  `StorageUnavailable`, as through SQLAlchemy. Writers queue on the store's `WriteGate`
  first, as every SQLite writer of the store does. A job handed to the thread (it waits
  there for another process's lock) runs to its end (its `COMMIT` or `ROLLBACK`) even if
  its caller is cancelled meanwhile, and the next job on that connection runs after it;
- the jobs run on two connections of the engine's own kind kept outside its pool, one for
  reads and one for writes (`OwnConnections`), so a job costs no checkout and return; the
  engine's `dispose` stops them. PostgreSQL never comes here: the store keeps SQLAlchemy's
  path for it.

`FastSqlite.write_plan` is the `sqlite3` executor of write plans (`storage.plan`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import namedtuple
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.dml import Insert

from bot.errors import StorageUnavailable
from storage.plan import Plan, Rows
from storage.prepared_cache import PreparedCache
from storage.sqlite.driver import Connection
from storage.sqlite.worker import CLOSED

if TYPE_CHECKING:
    from sqlalchemy.sql.compiler import SQLCompiler

T = TypeVar("T")

DATA_ERRORS: tuple[type[BaseException], ...] = (sqlite3.IntegrityError, sqlite3.DataError)
"""What SQLite refuses about the rows themselves, unwrapped: the cause of a job's
`StorageUnavailable`."""

# ---------------------------------------------------------------- the writers' queue


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


class OwnConnections:
    """The whole jobs' connections of one engine, outside its pool: one for reads, one for
    write transactions, opened on first use, shared by every `FastSqlite` of the engine.

    Taking a pooled connection and giving it back cost more than the job it ran (the
    pool's checkout and reset, a greenlet trip each way, a task to close the connection);
    a whole job needs none of that. Jobs on one connection run one after the other (inline
    when nothing is queued on its thread, else in order on the thread: see
    `storage.sqlite.driver`), and each write job is its whole transaction, so two never
    interleave. Reads have their own connection, so a write waiting on the thread for
    another process's lock never holds a read up. The engine's `dispose` stops both
    (`close` waits for their threads); the next job opens them again."""

    __slots__ = ("_connect", "_connections", "_lock", "_loop")

    def __init__(self, connect: Callable[[], Awaitable[Connection]]) -> None:
        self._connect = connect
        self._connections: dict[str, Connection] = {}
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def get(self, role: str) -> Connection:
        """The open connection for `role` ("read" or "write"), opened if need be."""
        connection = self._connections.get(role)
        if connection is not None and not connection.stopped:
            return connection
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        async with self._lock:
            connection = self._connections.get(role)
            if connection is None or connection.stopped:
                connection = self._connections[role] = await self._connect()
        return connection

    def drop(self, connection: Connection) -> None:
        """Forget a connection found closed; the next job opens another."""
        for role, known in list(self._connections.items()):
            if known is connection:
                del self._connections[role]
        connection.stop()

    def opened(self) -> tuple[Connection, ...]:
        return tuple(self._connections.values())

    def on_disposed(self, _engine: Any) -> None:
        """The engine's `engine_disposed` listener: stop both (their threads end after
        the jobs already queued)."""
        connections, self._connections = self.opened(), {}
        for connection in connections:
            connection.stop()

    async def close(self) -> None:
        """Close both and wait for their threads."""
        connections, self._connections = self.opened(), {}
        for connection in connections:
            await connection.close()


class Prepared:
    """One statement compiled for SQLite, run on a `sqlite3` connection (on its thread).

    A statement with parameters rendered per call (expanding ones: `IN` over a list) is
    compiled once too; its SQL and parameters are expanded for each call's values by
    SQLAlchemy's own `construct_expanded_state`, as its execution path does."""

    __slots__ = ("_columns", "_expanding", "_processors", "_row", "_spec", "sql")

    def __init__(
        self, statement: Any, dialect: Dialect, column_keys: Sequence[str] | None = None
    ) -> None:
        compiled = statement.compile(
            dialect=dialect, column_keys=None if column_keys is None else list(column_keys)
        )
        if compiled.positiontup is None:
            raise ValueError("only statements with positional parameters are prepared")
        self.sql = str(compiled)
        late = compiled.post_compile_params or compiled.literal_execute_params
        self._expanding: SQLCompiler | None = compiled if late else None
        processors = compiled._bind_processors
        spec: list[tuple[str | None, Any, Callable[[Any], Any] | None]] = []
        for name in () if self._expanding is not None else compiled.positiontup:
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
        """The positional parameters for named `values` (bind processors applied) of a
        statement without expanding parameters."""
        out: list[Any] = []
        for name, fixed, process in self._spec:
            if name is None:
                out.append(fixed)
            else:
                value = values[name]
                out.append(value if process is None else process(value))
        return tuple(out)

    def bound(self, values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """The SQL and positional parameters for named `values` (expanded, for a statement
        with expanding parameters)."""
        if self._expanding is None:
            return self.sql, self.params(values)
        state = self._expanding.construct_expanded_state(values)
        processors = state.processors
        out: list[Any] = []
        for name in state.positiontup or ():
            value = state.parameters[name]
            process = processors.get(name)
            out.append(value if process is None else process(value))
        return state.statement, tuple(out)

    def rows(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> list[Any]:
        """Every row of the statement, as SQLAlchemy would convert them, as named tuples
        (a textual statement without declared columns: named as SQLite names them)."""
        cursor = self._execute(conn, values)
        raw = cursor.fetchall()
        if self._row is None:  # a textual statement: its names as SQLite gives them
            names = [column[0] for column in cursor.description]
            self._row = namedtuple("Row", names, rename=True)  # type: ignore[misc]
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
        if self._expanding is not None:
            for one in values:
                self.run(conn, one)
            return
        for listener in STATEMENT_LISTENERS:
            listener(self.sql)
        conn.executemany(self.sql, [self.params(one) for one in values])

    def _execute(self, conn: sqlite3.Connection, values: Mapping[str, Any]) -> sqlite3.Cursor:
        sql, params = self.bound(values)
        for listener in STATEMENT_LISTENERS:
            listener(sql)
        return conn.execute(sql, params)


class FastSqlite:
    """Jobs of a SQLite store, one driver job each (see "Whole jobs" in the module doc)."""

    __slots__ = ("_engine", "_gate", "_own", "prepared")

    def __init__(self, engine: AsyncEngine, gate: WriteGate, own: OwnConnections) -> None:
        self._engine = engine
        self._gate = gate
        self._own = own
        dialect = engine.dialect
        self.prepared = PreparedCache(lambda sql, keys: Prepared(sql, dialect, keys)).get
        """`statement` compiled once (`storage.prepared_cache`)."""

    async def one_read(self, query: Any, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one read statement."""
        return await self.read(partial(self.prepared(query).rows, values=params))

    async def read_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """A plan that only reads (made afresh by `plan`), outside a transaction, as one job."""
        return await self.read(partial(self._drive, plan))

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the reading connection, outside a transaction (one statement reads one
        snapshot)."""
        return await self._job(work, "read")

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one write transaction (`BEGIN IMMEDIATE` … `COMMIT`), as one job;
        whatever it raises rolls everything back (a `sqlite3` error as `StorageUnavailable`)."""
        async with self._gate.hold():
            return await self._job(work, "write")

    async def close(self) -> None:
        """Close the engine's own connections (for every `FastSqlite` of the engine)."""
        await self._own.close()

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
                statement = step.statement
                # an INSERT's columns are the keys of its parameters
                if isinstance(step, Rows):
                    keys = tuple(step.params) if isinstance(statement, Insert) else None
                    answer = self.prepared(statement, keys).rows(conn, step.params)
                    continue
                many = step.params
                keys = tuple(many[0]) if isinstance(statement, Insert) else None
                if len(many) == 1:
                    self.prepared(statement, keys).run(conn, many[0])
                else:
                    self.prepared(statement, keys).run_many(conn, many)
                answer = None
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            plan.close()

    async def _job(self, work: Callable[[sqlite3.Connection], T], what: str) -> T:
        """`work` on the `what` ("read" or "write") connection: plain or in a transaction."""
        try:
            driver = await self._own.get(what)
            try:
                if what == "write":
                    answer = await driver.run_transaction(work)
                else:
                    answer = await driver.run(work)
            except sqlite3.ProgrammingError as exc:
                if CLOSED in str(exc):  # gone: the next job opens another
                    self._own.drop(driver)
                raise
        except sqlite3.Error as exc:
            raise StorageUnavailable(f"database {what} failed: {exc}") from exc
        # A job run inline answers without suspending its caller. Let the other tasks run
        # once, as a trip through the pool did (its connection's return was a task): a
        # caller storing message after message must not keep a turn it just scheduled from
        # starting.
        await asyncio.sleep(0)
        return answer
