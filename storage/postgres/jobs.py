"""PostgreSQL's whole jobs: raw asyncpg on a pooled connection, statements compiled once.

The store's hot reads and write plans (`storage.plan`) run here without SQLAlchemy's
per-statement path (a greenlet switch, the compiled-cache lookup, the execution context, a
`Row` per row), as `storage.sqlite.jobs` does for SQLite:

- each statement is compiled once (`Prepared`) for the engine's dialect: its SQL text (the
  `$n::TYPE` casts SQLAlchemy renders), its positional parameters with SQLAlchemy's own bind
  processors, its result columns with SQLAlchemy's own result processors, so the values read
  back are the ones `conn.execute(...)` would give, as named tuples. A statement with list
  parameters (`IN` over an expanding parameter) is expanded per call by SQLAlchemy's public
  `construct_expanded_state`;
- asyncpg prepares each SQL text once per connection (its statement cache) and runs a
  statement in one round trip; a write plan's transaction adds its `COMMIT`, and its
  `BEGIN` goes in one round trip with the plan's first statement when that is SQL text
  without parameters (the locks of `storage.postgres.parts`: an append is `BEGIN` + lock,
  the head, the linked insert, `COMMIT`);
- a job (`FastPostgres.read`, `FastPostgres.write`) takes its connection from the engine's
  pool (`AsyncEngine.raw_connection`; size, recycling and `dispose` stay SQLAlchemy's), or
  from the engine's `IdleConnections`: a few connections the last jobs left checked out, so
  that the next job skips the pool's checkout and return (two greenlet hops, half the CPU
  of a one-statement job). A read runs outside a transaction (each statement its own
  snapshot, as PostgreSQL's default isolation gives anyway), a write in one transaction. A
  connection the server dropped while it sat idle is found by the job's first round trip
  and leaves the pool, with every idle one, and the job runs again on the next connection,
  until one is live (after a restart every pooled one is dead, and each fails at once):
  nothing of it reached the server (`storage.reconnect` says why that is safe). Any other
  failure rolls the transaction back; a database error surfaces as `StorageUnavailable`, as
  through SQLAlchemy.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import namedtuple
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.util import greenlet_spawn

from bot.errors import StorageUnavailable
from storage.plan import Plan, Rows
from storage.prepared_cache import PreparedCache
from storage.reconnect import POOL_RECYCLE_SECONDS

T = TypeVar("T")

DATA_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.IntegrityConstraintViolationError,
    asyncpg.exceptions.DataError,
)
"""What PostgreSQL refuses about the rows themselves (a constraint, a value out of range),
unwrapped: the cause of a job's `StorageUnavailable`. asyncpg's client-side data error is a
ValueError."""
_DROPPED = (
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.InternalClientError,
    ConnectionError,
)
"""A connection the server closed (or that was lost) under a job; also asyncpg's "connection
is closed" when it had noticed already, and the protocol state a server's goodbye to an
idle connection can leave ("another operation is in progress"): the connection is unusable."""
_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, *_DROPPED, SQLAlchemyError, OSError)

STATEMENT_LISTENERS: list[Callable[[str], None]] = []
"""Called with each statement's SQL as it runs here, and with `BEGIN` (or `BEGIN; ` and the
statement sent with it in one round trip), `COMMIT` and `ROLLBACK` (for `bench.bench_trips`,
which counts statements and round trips; SQLAlchemy's events do not see these)."""


class Prepared:
    """One statement compiled for PostgreSQL (asyncpg), run on a raw asyncpg connection."""

    __slots__ = ("_compiled", "_expanding", "_processors", "_row", "_spec", "sql")

    def __init__(
        self, statement: Any, dialect: Dialect, column_keys: Sequence[str] | None = None
    ) -> None:
        compiled = statement.compile(
            dialect=dialect, column_keys=None if column_keys is None else list(column_keys)
        )
        if compiled.positiontup is None:
            raise ValueError("only statements with positional parameters are prepared")
        self._compiled = compiled
        self._expanding = bool(compiled.post_compile_params)
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
        self._row: Any = _row_type(tuple(c[0] for c in columns)) if columns else None
        self._processors = tuple(
            (index, process)
            for index, column in enumerate(columns)
            if (process := column[3]._cached_result_processor(dialect, None)) is not None
        )

    def bound(self, values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """The SQL and its positional parameters for named `values` (bind processors
        applied; a list parameter expanded)."""
        if self._expanding:
            state = self._compiled.construct_expanded_state(dict(values))
            out = []
            for name in state.positiontup or ():
                value = state.parameters[name]
                process = state.processors.get(name)
                out.append(value if process is None else process(value))
            return state.statement, tuple(out)
        args: list[Any] = []
        for name, fixed, process in self._spec:
            if name is None:
                args.append(fixed)
            else:
                value = values[name]
                args.append(value if process is None else process(value))
        return self.sql, tuple(args)

    async def rows(self, conn: asyncpg.Connection, values: Mapping[str, Any]) -> list[Any]:
        """Every row of the statement, as SQLAlchemy would convert them, as named tuples."""
        sql, args = self.bound(values)
        _noted(sql)
        records = await conn.fetch(sql, *args)
        if not records:
            return []
        make = self._row_type(records[0])._make
        processors = self._processors
        if not processors:
            return [make(record) for record in records]
        converted: list[Any] = []
        for record in records:
            row = list(record)
            for index, process in processors:
                row[index] = process(row[index])
            converted.append(make(row))
        return converted

    async def run(self, conn: asyncpg.Connection, values: Mapping[str, Any]) -> None:
        sql, args = self.bound(values)
        _noted(sql)
        await conn.execute(sql, *args)

    async def run_many(self, conn: asyncpg.Connection, values: Iterable[Mapping[str, Any]]) -> None:
        """The statement once per parameter set, pipelined in one `executemany`."""
        if self._expanding:
            for one in values:
                await self.run(conn, one)
            return
        _noted(self.sql)
        await conn.executemany(self.sql, [self.bound(one)[1] for one in values])

    def _row_type(self, record: asyncpg.Record) -> Any:
        if self._row is None:  # a textual statement: its columns are known once it ran
            self._row = _row_type(tuple(record.keys()))
        return self._row


async def raw_connection(conn: AsyncConnection) -> asyncpg.Connection:
    """The asyncpg connection under a connection taken from SQLAlchemy's pool; SQLAlchemy
    does not see what runs on it, so a caller leaves no transaction open on it."""
    raw = (await conn.get_raw_connection()).driver_connection
    if raw is None:  # pragma: no cover (the pool hands out connected connections)
        raise asyncpg.InterfaceError("connection is closed")
    return raw


def dropped(exc: BaseException, raw: asyncpg.Connection) -> bool:
    """Whether `exc`, raised by a statement on `raw`, says the connection is gone."""
    return isinstance(exc, _DROPPED) or (
        isinstance(exc, asyncpg.InterfaceError) and raw.is_closed()
    )


def _row_type(names: tuple[str, ...]) -> Any:
    """A statement's row class, made once and kept by its `Prepared` (making a named tuple
    class costs ~0.2 ms: it `eval`s)."""
    return namedtuple("Row", names, rename=True)


def _noted(sql: str) -> None:
    for listener in STATEMENT_LISTENERS:
        listener(sql)


KEEP_IDLE = 4
"""At most this many of the pool's connections stay checked out between jobs."""


class IdleConnections:
    """The connections jobs handed back, kept out of the engine's pool for the next job,
    the most recent first (one per engine, shared by its `FastPostgres`).

    A connection leaves for the pool when more than `keep` are idle, when it has been out of
    the pool for `POOL_RECYCLE_SECONDS` (the pool then recycles it, if it is as old), or when
    it is inside a transaction or closed. A dropped connection empties the stack (the server
    may have dropped them all). `release` gives every one back before the engine is
    disposed; disposing the engine closes any still here (a disposed pool never closes a
    connection checked out of it)."""

    __slots__ = ("_idle", "keep")

    def __init__(self, keep: int = KEEP_IDLE) -> None:
        self._idle: list[tuple[float, PoolProxiedConnection]] = []
        self.keep = keep

    @classmethod
    def of(cls, engine: AsyncEngine) -> IdleConnections:
        idle = _IDLE.get(engine.sync_engine)
        if idle is None:
            idle = _IDLE[engine.sync_engine] = cls()  # the engine holds it, not the reverse
            event.listen(engine.sync_engine, "engine_disposed", idle._disposed)
        return idle

    def _disposed(self, _engine: Any) -> None:
        """The engine was disposed: close what is idle here (SQLAlchemy runs this inside
        `AsyncEngine.dispose`'s greenlet, where a close may wait for the server)."""
        for pooled in self._drain():
            pooled.invalidate()

    def _drain(self) -> list[PoolProxiedConnection]:
        idle, self._idle = self._idle, []
        return [pooled for _since, pooled in idle]

    async def take(self, engine: AsyncEngine) -> tuple[float, PoolProxiedConnection]:
        """An idle connection and when it left the pool, or one from `engine`'s pool now."""
        if self._idle:
            return self._idle.pop()
        return time.monotonic(), await engine.raw_connection()

    async def put(self, since: float, pooled: PoolProxiedConnection) -> None:
        raw = pooled.driver_connection
        if (
            len(self._idle) < self.keep
            and time.monotonic() - since < POOL_RECYCLE_SECONDS
            and raw is not None
            and not raw.is_closed()
            and not raw.is_in_transaction()
        ):
            self._idle.append((since, pooled))
        else:
            await greenlet_spawn(pooled.close)

    async def release(self) -> None:
        """Every idle connection back to the pool."""
        for pooled in self._drain():
            await greenlet_spawn(pooled.close)

    async def discard(self) -> None:
        """Every idle connection out of the pool (one was found dropped)."""
        for pooled in self._drain():
            await greenlet_spawn(pooled.invalidate)


_IDLE: weakref.WeakKeyDictionary[Any, IdleConnections] = weakref.WeakKeyDictionary()


class FastPostgres:
    """Jobs of a PostgreSQL store on raw asyncpg connections (see the module docstring)."""

    __slots__ = ("_engine", "_idle", "_tries", "prepared")

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._idle = IdleConnections.of(engine)
        # a job's tries: every pooled connection may be dead, and one more is a new one
        self._tries = getattr(engine.pool, "size", lambda: 1)() + 2
        dialect = engine.dialect
        self.prepared = PreparedCache(lambda sql, keys: Prepared(sql, dialect, keys)).get
        """`statement` compiled once (`storage.prepared_cache`)."""

    async def one_read(self, query: Any, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one read statement."""
        return await self.read(partial(self.prepared(query).rows, values=params))

    async def close(self) -> None:
        """The idle connections back to the engine's pool (which the caller disposes)."""
        await self._idle.release()

    async def statement(self, query: Any, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one statement run as its own transaction (no `BEGIN`: one round
        trip), for a read or a single-statement write that may run again if the pooled
        connection turns out dropped."""
        return await self.one_read(query, params)

    async def read(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`work` on a pooled connection, outside a transaction."""
        return await self._job(lambda attempt: attempt.run(work), "read")

    async def write(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`work` in one transaction; whatever it raises rolls everything back."""
        return await self._job(lambda attempt: attempt.transaction(work), "write")

    async def read_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """A plan that only reads, outside a transaction (made afresh by `plan`)."""
        return await self.read(partial(self._drive, plan, None))

    async def write_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """Run a write plan (`storage.plan`, made afresh by `plan`: a job may run again on a
        fresh connection) in one transaction: this is its asyncpg executor. The `BEGIN`
        waits for the plan's first statement, and goes with it in one round trip when that
        statement is SQL text without parameters (a lock: `storage.postgres.parts`)."""

        def job(attempt: Attempt) -> Awaitable[T]:
            return attempt.transaction(partial(self._drive, plan, attempt), begin=False)

        return await self._job(job, "write")

    async def _drive(
        self, plan_of: Callable[[], Plan[T]], begins: Attempt | None, conn: asyncpg.Connection
    ) -> T:
        """Run the plan's steps on `conn`; `begins`: the attempt whose `BEGIN` is still to
        send (None: a read, or a transaction already begun)."""
        plan = plan_of()
        answer: Any = None
        try:
            while True:
                step = plan.send(answer)
                statement = step.statement
                if begins is not None and begins.pending:
                    if isinstance(statement, str):  # values written in: one simple query
                        await begins.begin(statement)
                        answer = None
                        continue
                    await begins.begin()
                if isinstance(statement, str):
                    _noted(statement)
                    await conn.execute(statement)
                    answer = None
                    continue
                # an INSERT's columns are the keys of its parameters
                if isinstance(step, Rows):
                    keys = tuple(step.params) if isinstance(statement, Insert) else None
                    answer = await self.prepared(statement, keys).rows(conn, step.params)
                    continue
                many = step.params
                keys = tuple(many[0]) if isinstance(statement, Insert) else None
                if len(many) == 1:
                    await self.prepared(statement, keys).run(conn, many[0])
                else:
                    await self.prepared(statement, keys).run_many(conn, many)
                answer = None
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            plan.close()

    async def _job(self, work: Callable[[Attempt], Awaitable[T]], what: str) -> T:
        tries = self._tries
        try:
            for attempt in range(1, tries + 1):
                # the pool's connection itself, without an `AsyncConnection` around it (a
                # third of the CPU of a one-statement job went to that wrapper)
                first = Attempt(*await self._idle.take(self._engine), self._idle)
                try:
                    return await work(first)
                except (*_DROPPED, asyncpg.InterfaceError) as exc:
                    if not dropped(exc, first.raw):
                        raise
                    await first.drop()
                    await self._idle.discard()
                    if attempt == tries or not first.retriable:
                        raise
                finally:
                    await first.give_back()
        except _FAILURES as exc:
            raise StorageUnavailable(f"database {what} failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover


class Attempt:
    """One try of a job on one pooled connection; `retriable` while nothing reached the
    server. SQLAlchemy never sees a transaction on it: handing it back runs nothing."""

    __slots__ = ("_done", "_idle", "_pooled", "_since", "pending", "raw", "retriable")

    def __init__(self, since: float, pooled: PoolProxiedConnection, idle: IdleConnections) -> None:
        self._pooled = pooled
        self._since = since
        self._idle = idle
        self._done = False
        self.raw: Any = pooled.driver_connection
        self.retriable = True
        self.pending = False
        """Whether the transaction's `BEGIN` is still to send (`begin`)."""

    async def run(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """A read: any read is safe to run again (it changed nothing)."""
        try:
            return await work(self.raw)
        except asyncio.CancelledError:
            await self.drop()
            raise

    async def transaction(
        self, work: Callable[[asyncpg.Connection], Awaitable[T]], *, begin: bool = True
    ) -> T:
        """`work` in one transaction; `begin=False`: `work` sends the `BEGIN` (`begin`)
        before its first statement (none: nothing to commit)."""
        self.pending = True
        if begin:
            await self.begin()
        try:
            result = await work(self.raw)
        except asyncio.CancelledError:
            await self.drop()  # the server rolls back what the closed connection began
            raise
        except BaseException:
            # `is_in_transaction` reads the server's last status: no round trip (a
            # `BEGIN` that went with a failing lock left an aborted transaction open)
            if not self.raw.is_closed() and self.raw.is_in_transaction():
                _noted("ROLLBACK")
                await self.raw.execute("ROLLBACK")
            raise
        if not self.pending:
            _noted("COMMIT")
            await self.raw.execute("COMMIT")
        return result

    async def begin(self, then: str | None = None) -> None:
        """Send the `BEGIN` (the job's first round trip), with `then`, SQL text without
        parameters, in the same simple query. Until it is answered nothing has reached the
        server: a dropped connection leaves the job free to run again."""
        sql = "BEGIN" if then is None else f"BEGIN; {then}"
        _noted(sql)
        await self.raw.execute(sql)
        self.pending = False
        self.retriable = False

    async def drop(self) -> None:
        """A statement cut off midway, or a connection the server dropped: the connection
        leaves the pool."""
        if not self._done:
            self._done = True
            await asyncio.shield(greenlet_spawn(self._pooled.invalidate))

    async def give_back(self) -> None:
        if not self._done:
            self._done = True
            await self._idle.put(self._since, self._pooled)
