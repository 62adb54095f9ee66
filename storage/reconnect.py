"""Retry-on-disconnect for PostgreSQL, in place of `pool_pre_ping`.

Pre-ping wrapped every checkout in `BEGIN; ";"; ROLLBACK`: a round trip and a server
transaction for each of a message's many transactions. Instead, pooled connections are
recycled after `POOL_RECYCLE_SECONDS` (`storage.engine`), and a connection the server dropped
meanwhile (a restart, `pg_terminate_backend`, a proxy's idle timeout) is found by the first
statement run on it: SQLAlchemy then raises a `DBAPIError` with `connection_invalidated`
and invalidates the pool. `FirstStatementRetry` runs that first statement once more on a
fresh connection. It is safe: nothing of the transaction reached the server, so a read or
a write that had not committed is simply started again. A connection that drops after the
first statement still fails the operation (`StorageUnavailable`): the body may have acted
on what the lost transaction read.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

log = logging.getLogger(__name__)

POOL_RECYCLE_SECONDS = 300
"""A pooled PostgreSQL connection older than this is closed at checkout, not reused."""


class FirstStatementRetry:
    """An `AsyncConnection` whose first statement, if it finds the connection dropped, is
    run again once on a fresh connection (in a fresh transaction when `begin`)."""

    __slots__ = ("_begin", "_conn", "_tried")

    def __init__(self, conn: AsyncConnection, *, begin: bool) -> None:
        self._conn = conn
        self._begin = begin
        self._tried = False

    def __getattr__(self, name: str) -> Any:
        if name in ("stream", "stream_scalars", "exec_driver_sql", "run_sync"):
            self._tried = True  # anything that runs a statement ends the first try
        return getattr(self._conn, name)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        return await self._run("execute", args, kwargs)

    async def scalar(self, *args: Any, **kwargs: Any) -> Any:
        return await self._run("scalar", args, kwargs)

    async def scalars(self, *args: Any, **kwargs: Any) -> Any:
        return await self._run("scalars", args, kwargs)

    async def _run(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._tried:
            return await getattr(self._conn, method)(*args, **kwargs)
        self._tried = True
        try:
            return await getattr(self._conn, method)(*args, **kwargs)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            log.info("database connection was dropped; running the statement on a fresh one")
            await self._conn.rollback()  # the next statement takes a new pooled connection
            if self._begin:
                await self._conn.begin()
            return await getattr(self._conn, method)(*args, **kwargs)
