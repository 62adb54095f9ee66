"""`SqlHistorySearch`: full-text search over a chat's messages (`store_ports.HistorySearch`)."""

from __future__ import annotations

from bot.domain.platform_messages import PlatformMessage
from storage.codec import (
    platform_message_from_row,
)
from storage.executor import Database
from storage.plan_run import run_plan
from storage.search_query import search_plan


class SqlHistorySearch:
    """`bot.store_ports.HistorySearch` on a `Database` (the index: `storage.search`)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def search_messages(
        self, chat_id: int, thread_id: int, query: str, *, limit: int
    ) -> tuple[PlatformMessage, ...]:
        """See `bot.ports.HistorySearch` and `storage.search`."""
        async with self._db.read() as conn:
            plan = search_plan(self._db.parts, chat_id, thread_id, query, limit=limit)
            rows = await run_plan(conn, plan)
        return tuple(map(platform_message_from_row, rows))
