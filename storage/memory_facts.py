"""Memory facts in SQLite and PostgreSQL (implements `bot.store_ports.MemoryFacts`).

`memory_facts(id, chat_id, member_id, author_id, text, created_at)`, one row per fact; every
statement names the chat, so no read or delete reaches another chat's facts. Adding a fact
checks both caps and inserts in one write plan (`storage.plan`), after the database's own
lock on the chat's writers (`SqlParts.lock_chat`: SQLite's one writer at a time,
PostgreSQL's transaction-scoped advisory lock), so two workers adding to one chat at once
cannot both pass a cap. A turn's read of the facts is one job (`Database.read_plan`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from functools import partial
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.context.memory_block import CHAT_WIDE, MemoryFact
from storage.codec import utc
from storage.executor import Database
from storage.plan import Plan, Rows, SqlParts, first_row
from storage.postgres.locks import advisory_key

_BIG = (
    sa.bindparam("chat_id", type_=sa.BigInteger),
    sa.bindparam("member_id", type_=sa.BigInteger),
)
_COLUMNS = "id, chat_id, member_id, author_id, text, created_at"

_COUNTS = sa.text(
    "SELECT count(*) AS chat, coalesce(sum(CASE WHEN member_id = :member_id THEN 1 ELSE 0 END), 0)"
    " AS member FROM memory_facts WHERE chat_id = :chat_id"
).bindparams(*_BIG)
_INSERT = sa.text(
    "INSERT INTO memory_facts (chat_id, member_id, author_id, text, created_at) "
    f"VALUES (:chat_id, :member_id, :author_id, :text, :created_at) RETURNING {_COLUMNS}"
).bindparams(
    *_BIG,
    sa.bindparam("author_id", type_=sa.BigInteger),
    sa.bindparam("created_at", type_=sa.DateTime(timezone=True)),
)
_OF = sa.text(
    f"SELECT {_COLUMNS} FROM memory_facts WHERE chat_id = :chat_id AND member_id = :member_id "
    "ORDER BY id DESC LIMIT :limit"
).bindparams(*_BIG)
_OF_MEMBER_AND_CHAT = sa.text(
    f"SELECT * FROM (SELECT 0 AS part, {_COLUMNS} FROM memory_facts "
    "WHERE chat_id = :chat_id AND member_id = :member_id ORDER BY id DESC LIMIT :limit) AS mine "
    f"UNION ALL SELECT * FROM (SELECT 1 AS part, {_COLUMNS} FROM memory_facts "
    "WHERE chat_id = :chat_id AND member_id = :chat_wide ORDER BY id DESC LIMIT :limit) AS chat "
    "ORDER BY part, id DESC"
).bindparams(*_BIG, sa.bindparam("chat_wide", type_=sa.BigInteger))
"""A member's newest facts, then the chat's, in one round trip."""
_FIND = sa.text(
    f"SELECT {_COLUMNS} FROM memory_facts WHERE chat_id = :chat_id AND id = :id"
).bindparams(sa.bindparam("chat_id", type_=sa.BigInteger), sa.bindparam("id", type_=sa.BigInteger))
_DELETE = sa.text("DELETE FROM memory_facts WHERE chat_id = :chat_id AND id IN :ids").bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger),
    sa.bindparam("ids", expanding=True, type_=sa.BigInteger),
)
_DELETE_MEMBER = sa.text(
    "DELETE FROM memory_facts WHERE chat_id = :chat_id AND member_id = :member_id"
).bindparams(*_BIG)
_LIST = sa.text(f"SELECT {_COLUMNS} FROM memory_facts ORDER BY chat_id, id DESC LIMIT :limit")
_LIST_CHAT = sa.text(
    f"SELECT {_COLUMNS} FROM memory_facts WHERE chat_id = :chat_id ORDER BY id DESC LIMIT :limit"
).bindparams(sa.bindparam("chat_id", type_=sa.BigInteger))
_MOVE = sa.text("UPDATE memory_facts SET chat_id = :new WHERE chat_id = :old").bindparams(
    sa.bindparam("new", type_=sa.BigInteger), sa.bindparam("old", type_=sa.BigInteger)
)


def _fact(row: Any) -> MemoryFact:
    created = row.created_at
    if isinstance(created, str):  # SQLite hands back text for a raw statement's column
        created = datetime.fromisoformat(created)
    return MemoryFact(
        id=int(row.id),
        chat_id=int(row.chat_id),
        member_id=int(row.member_id),
        author_id=int(row.author_id),
        text=str(row.text),
        created_at=utc(created),
    )


class SqlMemoryFacts:
    """Implements `bot.store_ports.MemoryFacts` on SQLite and PostgreSQL (module doc)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._db = Database(engine)

    async def add_fact(
        self,
        *,
        chat_id: int,
        member_id: int,
        author_id: int,
        text: str,
        created_at: datetime,
        per_member: int,
        per_chat: int,
    ) -> MemoryFact | Literal["per_member", "per_chat"]:
        row = {
            "chat_id": chat_id,
            "member_id": member_id,
            "author_id": author_id,
            "text": text,
            "created_at": created_at,
        }
        return await self._db.write_plan(
            partial(_add_plan, self._db.parts, row, per_member=per_member, per_chat=per_chat)
        )

    async def facts_of(
        self, chat_id: int, member_id: int | None, *, limit: int
    ) -> tuple[MemoryFact, ...]:
        return await self._db.read_plan(partial(_facts_plan, chat_id, member_id, limit))

    async def find_fact(self, chat_id: int, fact_id: int) -> MemoryFact | None:
        rows = await self._db.one_read(_FIND, {"chat_id": chat_id, "id": fact_id})
        return _fact(rows[0]) if rows else None

    async def delete_facts(self, chat_id: int, fact_ids: Collection[int]) -> int:
        if not fact_ids:
            return 0
        async with self._db.write() as conn:
            done = await conn.execute(_DELETE, {"chat_id": chat_id, "ids": sorted(set(fact_ids))})
        return int(done.rowcount)

    async def delete_member_facts(self, chat_id: int, member_id: int) -> int:
        async with self._db.write() as conn:
            done = await conn.execute(_DELETE_MEMBER, {"chat_id": chat_id, "member_id": member_id})
        return int(done.rowcount)

    async def list_facts(self, *, chat_id: int | None = None, limit: int) -> tuple[MemoryFact, ...]:
        if chat_id is None:
            rows = await self._db.one_read(_LIST, {"limit": limit})
        else:
            rows = await self._db.one_read(_LIST_CHAT, {"chat_id": chat_id, "limit": limit})
        return tuple(map(_fact, rows))

    async def move_chat_facts(self, old_chat_id: int, new_chat_id: int) -> int:
        if old_chat_id == new_chat_id:
            return 0
        async with self._db.write() as conn:
            done = await conn.execute(_MOVE, {"old": old_chat_id, "new": new_chat_id})
        return int(done.rowcount)


def _add_plan(
    parts: SqlParts, row: dict[str, Any], *, per_member: int, per_chat: int
) -> Plan[MemoryFact | Literal["per_member", "per_chat"]]:
    """Lock the chat's writers, check both caps, insert."""
    chat_id, member_id = row["chat_id"], row["member_id"]
    yield from parts.lock_chat(advisory_key("tgbot-memory", chat_id))
    counts = first_row((yield Rows(_COUNTS, {"chat_id": chat_id, "member_id": member_id})))
    if member_id != CHAT_WIDE and int(counts.member) >= per_member:
        return "per_member"
    if int(counts.chat) >= per_chat:
        return "per_chat"
    return _fact(first_row((yield Rows(_INSERT, row))))


def _facts_plan(chat_id: int, member_id: int | None, limit: int) -> Plan[tuple[MemoryFact, ...]]:
    """The member's newest facts (none for `CHAT_WIDE` or no member), then the chat's."""
    if member_id is None or member_id == CHAT_WIDE:
        rows = yield Rows(_OF, {"chat_id": chat_id, "member_id": CHAT_WIDE, "limit": limit})
    else:
        params = {"chat_id": chat_id, "member_id": member_id, "chat_wide": CHAT_WIDE}
        rows = yield Rows(_OF_MEMBER_AND_CHAT, {**params, "limit": limit})
    return tuple(map(_fact, rows))
