"""`Database`: the store's transactions on one engine, and where each runs its plans.

Every store role (`storage.sessions`, `storage.history`, ...) reads and writes through one
`Database`: a read (one statement: no transaction), a write transaction, a write plan
(`storage.plan`) run as one `sqlite3` job on SQLite or on a SQLAlchemy connection
(`storage.plan_run.run_plan`). What differs between databases comes from the engine's backend
(`storage.engine.backend_for`): the writers' queue on SQLite, the whole jobs of each
database (`jobs_for`: `storage.sqlite.jobs`, `storage.postgres.jobs`: the hot reads and the
write plans without
SQLAlchemy's per-statement path), a dropped connection's retry on PostgreSQL
(`storage.reconnect`), and the sub-plans of each (`parts_for`: `storage.sqlite.parts`,
`storage.postgres.parts`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, nullcontext
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.clock import SYSTEM_CLOCK
from bot.errors import StorageUnavailable
from bot.ports import Clock
from storage.engine import ONE_STATEMENT, WRITE, backend_for
from storage.plan import Plan, SqlParts
from storage.plan_run import run_plan
from storage.postgres.jobs import DATA_ERRORS as POSTGRES_DATA_ERRORS
from storage.reconnect import FirstStatementRetry
from storage.sqlite.jobs import DATA_ERRORS as SQLITE_DATA_ERRORS
from storage.sqlite.jobs import WriteGate

T = TypeVar("T")

DATA_ERRORS: tuple[type[BaseException], ...] = (*SQLITE_DATA_ERRORS, *POSTGRES_DATA_ERRORS)
"""What a database refuses about the rows themselves, as its driver raises it under a whole
job (the cause of the job's `StorageUnavailable`)."""


class Jobs(Protocol):
    """A database's whole jobs (`storage.sqlite.jobs.FastSqlite`,
    `storage.postgres.jobs.FastPostgres`)."""

    async def one_read(self, query: Any, params: dict[str, Any]) -> Sequence[Any]: ...

    async def read_plan(self, plan: Callable[[], Plan[T]]) -> T: ...

    async def write_plan(self, plan: Callable[[], Plan[T]]) -> T: ...

    async def close(self) -> None: ...


def jobs_for(engine: AsyncEngine, gate: WriteGate | None) -> Jobs | None:
    """The whole jobs of the engine's database (None: SQLAlchemy's path for everything, as
    for a SQLite engine whose connections are not `storage.sqlite.driver`'s)."""
    jobs: Jobs | None = backend_for(engine).jobs(engine, gate)
    return jobs


def parts_for(engine: AsyncEngine | AsyncConnection) -> SqlParts:
    """The sub-plans of the engine's (or connection's) database."""
    return backend_for(engine).parts


class Database:
    """One engine's transactions for the store roles (see the module docstring)."""

    def __init__(self, engine: AsyncEngine, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.engine = engine
        self.now: Callable[[], datetime] = clock.now
        backend = backend_for(engine)
        self.parts = backend.parts
        # one process's writers queue here; a shared database's queue on its row locks,
        # and its pooled connections may have been dropped by the server
        self._gate = None if backend.shared else WriteGate()
        self._retry = backend.shared
        self._fast = jobs_for(engine, self._gate)
        """The hot reads and the write plans, in one job each."""

    async def close(self) -> None:
        """Close the engine's connections (on SQLite, the fast path's own ones first)."""
        if self._fast is not None:
            await self._fast.close()
        await self.engine.dispose()

    @asynccontextmanager
    async def read(self, *, one_statement: bool = False) -> AsyncIterator[AsyncConnection]:
        """A read-only connection; `one_statement` when it runs a single statement (which
        is then its own transaction: SQLite skips the `BEGIN`, PostgreSQL runs it in
        autocommit, without the `BEGIN` and `ROLLBACK` round trips around it). On
        PostgreSQL its first statement is run again on a fresh connection if the pooled one
        was dropped (`storage.reconnect`)."""
        try:
            async with self.engine.connect() as conn:
                if one_statement:
                    await conn.execution_options(**ONE_STATEMENT)
                    if self._retry:  # PostgreSQL (asyncpg: a flag, no round trip)
                        await conn.execution_options(isolation_level="AUTOCOMMIT")
                if self._retry:
                    yield cast(AsyncConnection, FirstStatementRetry(conn, begin=False))
                else:
                    yield conn
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"database read failed: {exc}") from exc

    async def one_read(self, query: Any, params: dict[str, Any]) -> Sequence[Any]:
        """The rows of one read statement: one job, without SQLAlchemy's execution path
        (`jobs_for`, same values); without jobs through `read(one_statement=True)`."""
        if self._fast is not None:
            return await self._fast.one_read(query, params)
        async with self.read(one_statement=True) as conn:
            return (await conn.execute(query, params)).all()

    async def read_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """Run a plan that only reads, without list parameters (made afresh by `plan`), as
        one job outside a transaction; without jobs on a SQLAlchemy read connection."""
        if self._fast is not None:
            return await self._fast.read_plan(plan)
        async with self.read() as conn:
            return await run_plan(conn, plan())

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a write transaction, committed when the body ends; on PostgreSQL
        its first statement is run again in a fresh transaction on a fresh connection if
        the pooled one was dropped (`storage.reconnect`)."""
        async with self._gate.hold() if self._gate is not None else nullcontext():
            try:
                async with self.engine.connect() as conn:
                    await conn.execution_options(**WRITE)
                    if not self._retry:
                        async with conn.begin():
                            yield conn
                        return
                    # begun and committed here, not by `conn.begin()`'s block: a retry
                    # replaces the transaction that block would commit
                    await conn.begin()
                    yield cast(AsyncConnection, FirstStatementRetry(conn, begin=True))
                    await conn.commit()
            except SQLAlchemyError as exc:
                raise StorageUnavailable(f"database write failed: {exc}") from exc

    async def write_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """Run a write plan (`storage.plan`, made afresh by `plan`) in one write transaction:
        as one job (`jobs_for`), without jobs on a SQLAlchemy connection."""
        if self._fast is not None:
            return await self._fast.write_plan(plan)
        async with self.write() as conn:
            return await run_plan(conn, plan())
