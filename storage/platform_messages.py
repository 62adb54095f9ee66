"""`SqlPlatformMessages`: real platform messages on SQL (`bot.store_ports.PlatformMessages`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.platform_messages import PlatformMessage
from storage.codec import (
    platform_message_from_row,
    platform_message_row,
)
from storage.erase import erase_rows
from storage.executor import Database
from storage.plan_run import run_plan
from storage.queries import (
    PLATFORM_MESSAGE_BY_KEY,
)


class SqlPlatformMessages:
    """`bot.store_ports.PlatformMessages` on a `storage.executor.Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record_platform_messages(self, messages: Sequence[PlatformMessage]) -> None:
        if not messages:
            return
        async with self._db.write() as conn:
            await self._write_platform_messages(conn, messages, default_record_id=None)

    async def find_platform_message(self, chat_id: int, message_id: int) -> PlatformMessage | None:
        params = {"chat_id": chat_id, "message_id": message_id}
        rows = await self._db.one_read(PLATFORM_MESSAGE_BY_KEY, params)
        return platform_message_from_row(rows[0]) if rows else None

    async def _write_platform_messages(
        self,
        conn: AsyncConnection,
        messages: Sequence[PlatformMessage],
        *,
        default_record_id: int | None,
    ) -> None:
        rows = [platform_message_row(m, default_record_id=default_record_id) for m in messages]
        await run_plan(conn, self._db.parts.store_platform_messages(rows))

    async def erase_message(
        self, chat_id: int, message_id: int, *, keep_media: bool = False
    ) -> bool:
        """See `bot.store_ports.PlatformMessages.erase_message` and `storage.erase`."""
        async with self._db.write() as conn:
            return await erase_rows(
                conn, self._db.parts, chat_id, message_id, keep_media=keep_media
            )
