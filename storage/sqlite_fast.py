"""SQLite's hot statements without SQLAlchemy's per-statement path, each job run at once.

Every statement SQLAlchemy runs costs the event loop its execution path (a greenlet switch,
the compiled-cache lookup, parameter processing, a `Row` per row) and one job of the
driver (`storage.sqlite_driver`: run on the loop, or on the connection's thread when it must
wait for a lock). For the statements of every answered message, this module instead:

- compiles each statement once (`Prepared`) for the engine's dialect: its SQL text, its
  positional parameters with SQLAlchemy's own bind processors (a `DateTime` is stored as
  SQLAlchemy stores it), and its result columns with SQLAlchemy's own result processors, so
  the values read back are the ones `conn.execute(...)` would give, as attributes of a
  named tuple;
- runs a whole job as one driver job: a read (`FastSqlite.read`) or a write transaction,
  `BEGIN IMMEDIATE`, its statements and `COMMIT` (`FastSqlite.write`). A failing statement
  rolls the transaction back; its `sqlite3`
  error surfaces as `StorageUnavailable`, as through SQLAlchemy. Writers queue on the
  store's `WriteGate` first, as every SQLite writer of the store does. A job handed to the
  thread (it waits there for another process's lock) runs to its end (its `COMMIT` or
  `ROLLBACK`) even if its caller is cancelled meanwhile, and the connection goes back to the
  pool after it.

The connection still comes from the engine's pool (its size, its reset on return, which the
driver answers without running anything when no transaction is open, and `dispose`).
PostgreSQL never comes here: the store keeps SQLAlchemy's path for it.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.errors import StorageUnavailable
from storage import sqlite_driver

T = TypeVar("T")
_CLOSED = "Cannot operate on a closed database."
STATEMENT_LISTENERS: list[Callable[[str], None]] = []
"""Called with each statement's SQL as it runs here, on the connection's thread (for
`bench.bench_trips`, which counts statements; SQLAlchemy's events do not see these)."""
_DRIVEN: weakref.WeakSet[Any] = weakref.WeakSet()
"""The (sync) engines whose connections are `storage.sqlite_driver` ones."""


def mark_driven(engine: AsyncEngine) -> AsyncEngine:
    """Note that `engine`'s connections come from `storage.sqlite_driver.connect`."""
    _DRIVEN.add(engine.sync_engine)
    return engine


def for_engine(engine: AsyncEngine, gate: sqlite_driver.WriteGate | None) -> FastSqlite | None:
    """The fast path of a SQLite engine driven by `storage.sqlite_driver` (else None: the
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
    """Jobs of a SQLite store, one driver job each (see the module docstring)."""

    __slots__ = ("_dialect", "_engine", "_gate", "_prepared")

    def __init__(self, engine: AsyncEngine, gate: sqlite_driver.WriteGate) -> None:
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
        """`work` on a pooled connection's thread, outside a transaction (one statement
        reads one snapshot)."""
        try:
            async with self._engine.connect() as conn:
                driver = _driver(conn)
                try:
                    return await driver.run(work)
                except sqlite3.Error as exc:
                    await _drop_if_closed(conn, exc)
                    raise
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise StorageUnavailable(f"database read failed: {exc}") from exc

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one write transaction (`BEGIN IMMEDIATE` … `COMMIT`), as one job;
        whatever it raises rolls everything back (a `sqlite3` error as `StorageUnavailable`)."""
        async with self._gate.hold():
            try:
                async with self._engine.connect() as conn:
                    driver = _driver(conn)
                    try:
                        return await driver.run_transaction(work)
                    except sqlite3.Error as exc:
                        await _drop_if_closed(conn, exc)
                        raise
            except (SQLAlchemyError, sqlite3.Error) as exc:
                raise StorageUnavailable(f"database write failed: {exc}") from exc


def _driver(conn: AsyncConnection) -> sqlite_driver.Connection:
    """The driver connection under a connection just taken from the pool (no I/O: the pool
    has connected it already)."""
    driver = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
    if not isinstance(driver, sqlite_driver.Connection):
        raise TypeError(f"not a storage.sqlite_driver connection: {driver!r}")
    return driver


async def _drop_if_closed(conn: AsyncConnection, exc: sqlite3.Error) -> None:
    """A closed connection leaves the pool, as SQLAlchemy's disconnect check would have it."""
    if isinstance(exc, sqlite3.ProgrammingError) and _CLOSED in str(exc):
        await conn.invalidate()
