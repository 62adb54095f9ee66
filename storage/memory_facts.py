"""Memory facts in SQLite and PostgreSQL (implements `bot.store_ports.MemoryFacts`).

`memory_facts(id, chat_id, member_id, author_id, text, created_at)`, one row per fact; every
statement names the chat, so no read or delete reaches another chat's facts. Adding a fact
checks both caps and inserts in one transaction: on SQLite a write transaction
(`BEGIN IMMEDIATE`, one writer at a time); on PostgreSQL behind a transaction-scoped
advisory lock on the chat, so two workers adding to one chat at once cannot both pass a cap.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.context.memory_block import CHAT_WIDE, MemoryFact
from bot.errors import StorageUnavailable
from storage.codec import utc
from storage.engine import WRITE
from storage.executor import Database
from storage.locks import advisory_key

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
_MINE = (
    f"SELECT {_COLUMNS}, {{part}} AS part FROM memory_facts "
    "WHERE chat_id = :chat_id AND member_id = {member} ORDER BY id DESC LIMIT :limit"
)
_OF_BOTH = sa.text(
    f"SELECT {_COLUMNS} FROM (SELECT * FROM ({_MINE.format(part=0, member=':member_id')}) AS mine"
    f" UNION ALL SELECT * FROM ({_MINE.format(part=1, member=CHAT_WIDE)}) AS chat_wide) AS facts"
    " ORDER BY part, id DESC"
).bindparams(*_BIG)
_FACT_COLUMNS: dict[str, Any] = {
    "id": sa.BigInteger,
    "chat_id": sa.BigInteger,
    "member_id": sa.BigInteger,
    "author_id": sa.BigInteger,
    "text": sa.Text,
    "created_at": sa.DateTime(timezone=True),
}
_OF_TYPED = _OF.columns(**_FACT_COLUMNS)
_OF_BOTH_TYPED = _OF_BOTH.columns(**_FACT_COLUMNS)
"""A member's facts, newest first, then the chat-wide ones: one statement (one snapshot)."""
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
_LOCK = sa.text("SELECT pg_advisory_xact_lock(:key)").bindparams(
    sa.bindparam("key", type_=sa.BigInteger)
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
        self._engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        self._db = Database(engine)
        """For `one_read` only (its writer queue is not used: `_write` keeps its own)."""

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
        async with self._write() as conn:
            if self._postgres:
                await conn.execute(_LOCK, {"key": advisory_key("tgbot-memory", chat_id)})
            counts = (
                await conn.execute(_COUNTS, {"chat_id": chat_id, "member_id": member_id})
            ).one()
            if member_id != CHAT_WIDE and int(counts.member) >= per_member:
                return "per_member"
            if int(counts.chat) >= per_chat:
                return "per_chat"
            row = (
                await conn.execute(
                    _INSERT,
                    {
                        "chat_id": chat_id,
                        "member_id": member_id,
                        "author_id": author_id,
                        "text": text,
                        "created_at": created_at,
                    },
                )
            ).one()
        return _fact(row)

    async def facts_of(
        self, chat_id: int, member_id: int | None, *, limit: int
    ) -> tuple[MemoryFact, ...]:
        """Read before every turn: one statement, on SQLite one driver job."""
        params = {"chat_id": chat_id, "limit": limit}
        if member_id is not None and member_id != CHAT_WIDE:
            rows = await self._db.one_read(_OF_BOTH_TYPED, {**params, "member_id": member_id})
        else:
            rows = await self._db.one_read(_OF_TYPED, {**params, "member_id": CHAT_WIDE})
        return tuple(map(_fact, rows))

    async def find_fact(self, chat_id: int, fact_id: int) -> MemoryFact | None:
        async with self._read() as conn:
            row = (await conn.execute(_FIND, {"chat_id": chat_id, "id": fact_id})).first()
        return None if row is None else _fact(row)

    async def delete_facts(self, chat_id: int, fact_ids: Collection[int]) -> int:
        if not fact_ids:
            return 0
        async with self._write() as conn:
            done = await conn.execute(_DELETE, {"chat_id": chat_id, "ids": sorted(set(fact_ids))})
        return int(done.rowcount)

    async def delete_member_facts(self, chat_id: int, member_id: int) -> int:
        async with self._write() as conn:
            done = await conn.execute(_DELETE_MEMBER, {"chat_id": chat_id, "member_id": member_id})
        return int(done.rowcount)

    async def list_facts(self, *, chat_id: int | None = None, limit: int) -> tuple[MemoryFact, ...]:
        async with self._read() as conn:
            if chat_id is None:
                rows = (await conn.execute(_LIST, {"limit": limit})).all()
            else:
                rows = (await conn.execute(_LIST_CHAT, {"chat_id": chat_id, "limit": limit})).all()
        return tuple(map(_fact, rows))

    async def move_chat_facts(self, old_chat_id: int, new_chat_id: int) -> int:
        if old_chat_id == new_chat_id:
            return 0
        async with self._write() as conn:
            done = await conn.execute(_MOVE, {"old": old_chat_id, "new": new_chat_id})
        return int(done.rowcount)

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.connect() as conn:
                await conn.execution_options(**WRITE)
                async with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"memory facts: {exc}") from exc

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"memory facts: {exc}") from exc
