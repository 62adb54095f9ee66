"""The cursor of `storage.sqlite.driver.Connection`, and the queue its `_tx` stands for: the
face SQLAlchemy's `sqlite+aiosqlite` adapter talks to (`cursor()`, `execute()`, the fetches,
`close()`; `_tx.put_nowait` for the `isolation_level` setter). The store's own whole jobs
(`storage.sqlite.jobs`) never use a cursor.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Sequence
from typing import Any, Protocol

from storage.sqlite import adapter_work
from storage.sqlite.worker import Description, Row, Work


class Connection(Protocol):
    """What a cursor asks of `storage.sqlite.driver.Connection`."""

    def _run(self, work: Work) -> asyncio.Future[Any]: ...

    def _submit(self, future: asyncio.Future[Any], work: Work) -> None: ...

    def _hold_begin(self, operation: str, parameters: Any) -> bool: ...


class AdapterQueue:
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
        answer = await self._connection._run(adapter_work.statement(operation, parameters))
        self.description, self.rowcount, self.lastrowid, self._rows = answer
        self._next = 0
        return self

    async def executemany(self, operation: str, seq_of_parameters: Iterable[Any]) -> Cursor:
        self.rowcount, self.lastrowid = await self._connection._run(
            adapter_work.statements(operation, seq_of_parameters)
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
