"""Per-chat settings changed with `/settings`, in the database over the TOML file's
(implements `bot.services.chat_settings.ChatSettingsStore`; migration 0013). One row per
(chat, setting), its value as JSON; every worker reads the whole table (it is small: a few
rows per configured group)."""

from __future__ import annotations

import json
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.services.chat_settings import Overrides
from storage.executor import Database

_ALL = sa.text("SELECT chat_id, name, value FROM chat_settings")
_DELETE = sa.text("DELETE FROM chat_settings WHERE chat_id = :chat_id AND name = :name").bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger)
)
_INSERT = sa.text(
    "INSERT INTO chat_settings (chat_id, name, value, changed_by, changed_at) "
    "VALUES (:chat_id, :name, :value, :changed_by, :changed_at)"
).bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger),
    sa.bindparam("changed_by", type_=sa.BigInteger),
    sa.bindparam("changed_at", type_=sa.DateTime(timezone=True)),
)


class SqlChatSettings:
    """The `/settings` changes of every chat, in `chat_settings` (SQLite or PostgreSQL)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._db = Database(engine)
        """For `one_read` only: `load` runs every few seconds while messages come in."""

    async def load(self) -> Overrides:
        rows = await self._db.one_read(_ALL, {})
        found: dict[int, dict[str, object]] = {}
        for row in rows:
            try:
                value = json.loads(str(row.value))
            except ValueError:
                continue  # not ours: skipped, never fatal
            found.setdefault(int(row.chat_id), {})[str(row.name)] = value
        return found

    async def change(
        self, chat_id: int, name: str, value: object, *, by: int, at: datetime
    ) -> None:
        """Set (or with `value` None, clear) one setting of one chat, in one transaction."""
        async with self._engine.begin() as conn:
            await conn.execute(_DELETE, {"chat_id": chat_id, "name": name})
            if value is not None:
                await conn.execute(
                    _INSERT,
                    {
                        "chat_id": chat_id,
                        "name": name,
                        "value": json.dumps(value, ensure_ascii=False),
                        "changed_by": by,
                        "changed_at": at,
                    },
                )
