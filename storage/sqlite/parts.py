"""SQLite's sub-plans of the record write: no row locks, ids after the largest, FTS5 index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import sqlite

from storage.plan import Plan, Rows, Run
from storage.queries import upserting_platform_messages
from storage.search import SQLITE_DROP, SQLITE_PUT, index_params
from storage.tables import MESSAGES, PLATFORM_MESSAGES

_MAX_RECORD_ID = select(func.coalesce(func.max(MESSAGES.c.id), 0))

UPSERT_PLATFORM_MESSAGES = upserting_platform_messages(sqlite.insert(PLATFORM_MESSAGES))


class SqliteParts:
    """`storage.plan.SqlParts` for SQLite."""

    __slots__ = ()

    def insert(self, table: Any) -> Any:
        """The database's INSERT into `table`, which knows ON CONFLICT."""
        return sqlite.insert(table)

    def lock_sessions(self, session_ids: Sequence[int]) -> Plan[None]:
        """Nothing to run: a write transaction's `BEGIN IMMEDIATE` holds the database's one
        write lock already."""
        return
        yield  # a generator that yields nothing

    def new_record_ids(self, count: int) -> Plan[list[int]]:
        """After the largest id (the write lock is held: nobody takes them meanwhile)."""
        (row,) = yield Rows(_MAX_RECORD_ID, {})
        top = int(row[0])
        return list(range(top + 1, top + 1 + count))

    def store_platform_messages(self, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
        yield Run(UPSERT_PLATFORM_MESSAGES, rows)
        put, drop = index_params(
            ((r["chat_id"], r["thread_id"], r["message_id"], r["text"]) for r in rows),
            postgres=False,
        )
        if put:
            yield Run(SQLITE_PUT, put)
        if drop:
            yield Run(SQLITE_DROP, drop)


SQLITE = SqliteParts()
