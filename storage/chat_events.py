"""`SqlChatEvents`: a chat's membership and reactions on SQL (`bot.store_ports.ChatEventStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, delete, select, update

from bot.ports import (
    StoredReaction,
)
from storage.codec import utc
from storage.executor import Database
from storage.queries import (
    CLOSED_SESSION_OF_CHAT,
    REACTIONS_SINCE,
)
from storage.reaction_codec import latest_reactions, reaction_row, stored_reaction
from storage.tables import REACTIONS, SESSIONS

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DROP_REACTION = delete(REACTIONS).where(
    REACTIONS.c.chat_id == bindparam("r_chat"),
    REACTIONS.c.message_id == bindparam("r_message"),
    REACTIONS.c.user_id == bindparam("r_user"),
    REACTIONS.c.emoji == bindparam("r_emoji"),
)


def _reaction_key(reaction: StoredReaction) -> dict[str, Any]:
    return {
        "r_chat": reaction.chat_id,
        "r_message": reaction.message_id,
        "r_user": reaction.user_id,
        "r_emoji": reaction.emoji,
    }


class SqlChatEvents:
    """`bot.store_ports.ChatEventStore` on a `storage.executor.Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def set_chat_closed(self, chat_id: int, closed: bool) -> int:
        now = self._db.now()
        where = SESSIONS.c.chat_id == chat_id
        where = where & (
            SESSIONS.c.closed_at.is_(None) if closed else SESSIONS.c.closed_at.is_not(None)
        )
        async with self._db.write() as conn:
            result = await conn.execute(
                update(SESSIONS).where(where).values(closed_at=now if closed else None)
            )
        return int(result.rowcount or 0)

    async def is_chat_closed(self, chat_id: int) -> bool:
        return bool(await self._db.one_read(CLOSED_SESSION_OF_CHAT, {"chat_id": chat_id}))

    async def record_reactions(self, reactions: Sequence[StoredReaction]) -> None:
        if not reactions:
            return
        latest = latest_reactions(reactions)
        async with self._db.write() as conn:
            # one row per member, message and emoji: a toggle replaces the member's row (a
            # thousand 👍 toggles are one row, not five hundred)
            await conn.execute(_DROP_REACTION, [_reaction_key(r) for r in latest])
            await conn.execute(REACTIONS.insert(), [reaction_row(r) for r in latest])

    async def reactions_since(
        self, chat_id: int, thread_id: int, since: datetime | None, *, limit: int
    ) -> tuple[StoredReaction, ...]:
        params = {
            "chat_id": chat_id,
            "thread_id": thread_id,
            "since": EPOCH if since is None else utc(since),
            "limit": limit,
        }
        async with self._db.read(one_statement=True) as conn:
            rows = (await conn.execute(REACTIONS_SINCE, params)).all()
        return tuple(stored_reaction(row) for row in reversed(rows))

    async def reactions_between(self, start: datetime, end: datetime) -> tuple[StoredReaction, ...]:
        query = (
            select(REACTIONS)
            .where(REACTIONS.c.created_at >= utc(start), REACTIONS.c.created_at < utc(end))
            .order_by(REACTIONS.c.created_at, REACTIONS.c.id)
        )
        async with self._db.read(one_statement=True) as conn:
            rows = (await conn.execute(query)).all()
        return latest_reactions(stored_reaction(row) for row in rows)
