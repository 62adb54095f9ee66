"""Whether a user wrote in one of some groups, from the stored platform messages
(implements `bot.services.private_members.SeenInGroups`; index `ix_platform_events_sender`,
migration 0014)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.errors import StorageUnavailable

SEEN_IN_GROUPS = sa.text(
    "SELECT 1 FROM platform_events WHERE sender_id = :user_id AND chat_id IN :chat_ids"
    " AND chat_id < 0 LIMIT 1"
).bindparams(
    sa.bindparam("user_id", type_=sa.BigInteger),
    sa.bindparam("chat_ids", expanding=True, type_=sa.BigInteger),
)
SEEN_IN_ANY_GROUP = sa.text(
    "SELECT 1 FROM platform_events WHERE sender_id = :user_id AND chat_id < 0 LIMIT 1"
).bindparams(sa.bindparam("user_id", type_=sa.BigInteger))


class SqlGroupMembers:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def seen_in_groups(self, user_id: int, chat_ids: Sequence[int]) -> bool:
        """Whether a stored message of `user_id` is in one of the groups `chat_ids` (empty:
        any group; a group's id is negative, a private chat's is no group)."""
        if chat_ids:
            query, params = SEEN_IN_GROUPS, {"user_id": user_id, "chat_ids": list(chat_ids)}
        else:
            query, params = SEEN_IN_ANY_GROUP, {"user_id": user_id}
        try:
            async with self.engine.connect() as conn:
                return (await conn.execute(query, params)).first() is not None
        except (SQLAlchemyError, OSError) as exc:
            raise StorageUnavailable(f"could not read the platform messages: {exc}") from exc
