"""PostgreSQL's sub-plans of the record write: `FOR UPDATE`, the id sequence, tsvector index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, select, text
from sqlalchemy.dialects import postgresql

from storage.plan import Plan, Rows, Run
from storage.queries import upserting_platform_messages
from storage.search import PG_DROP, PG_PUT, index_params
from storage.tables import PLATFORM_MESSAGES, SESSIONS

_LOCK_SESSIONS = (
    select(SESSIONS.c.id)
    .where(SESSIONS.c.id.in_(bindparam("session_ids", expanding=True)))
    .order_by(SESSIONS.c.id)
    .with_for_update()
)
_RECORD_IDS = text(
    "SELECT nextval(pg_get_serial_sequence('agent_messages', 'id')) FROM generate_series(1, :n)"
)

UPSERT_PLATFORM_MESSAGES = upserting_platform_messages(postgresql.insert(PLATFORM_MESSAGES))


class PostgresParts:
    """`storage.plan.SqlParts` for PostgreSQL."""

    __slots__ = ()

    def insert(self, table: Any) -> Any:
        """The database's INSERT into `table`, which knows ON CONFLICT."""
        return postgresql.insert(table)

    def lock_sessions(self, session_ids: Sequence[int]) -> Plan[None]:
        """`FOR UPDATE` on the rows, in id order (two writers never wait on each other)."""
        yield Rows(_LOCK_SESSIONS, {"session_ids": sorted(session_ids)})

    def new_record_ids(self, count: int) -> Plan[list[int]]:
        """From the table's sequence."""
        rows = yield Rows(_RECORD_IDS, {"n": count})
        return [int(row[0]) for row in rows]

    def store_platform_messages(self, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
        yield Run(UPSERT_PLATFORM_MESSAGES, rows)
        put, drop = index_params(
            ((r["chat_id"], r["thread_id"], r["message_id"], r["text"]) for r in rows),
            postgres=True,
        )
        if put:
            yield Run(PG_PUT, put)
        if drop:
            yield Run(PG_DROP, drop)


POSTGRES = PostgresParts()
