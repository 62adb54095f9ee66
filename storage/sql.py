"""`SqlStore`: every store role on one SQLite or PostgreSQL database, composed.

Each role of `bot.store_ports` has its own class and file, all on one `storage.executor.
Database` (the engine's transactions and the executors of write plans): `SqlSessions`
(`storage.sessions`), `SqlHistory` (`storage.history`), `SqlPlatformMessages`
(`storage.platform_messages`), `SqlHistorySearch` (`storage.history_search`),
`SqlChatEvents` (`storage.chat_events`) and `SqlClaims` (`storage.claims`). What differs
between the databases is in `storage.executor`, `storage.sqlite` and `storage.postgres`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.clock import SYSTEM_CLOCK
from bot.ports import Clock
from bot.store_ports import ConversationStore
from storage.chat_events import SqlChatEvents
from storage.claims import SqlClaims
from storage.codec import utc
from storage.executor import Database
from storage.history import SqlHistory
from storage.history_search import SqlHistorySearch
from storage.platform_messages import SqlPlatformMessages
from storage.retention import PruneResult
from storage.sessions import SqlSessions
from storage.sql_prune import prune_rows


class SqlStore(
    SqlSessions, SqlHistory, SqlPlatformMessages, SqlHistorySearch, SqlChatEvents, SqlClaims
):
    """`bot.store_ports.ConversationStore` over one async SQLAlchemy engine.

    The schema comes from `storage.migrate.upgrade_database`; this class never creates it.
    Database failures surface as `StorageError`; unknown sessions or records as
    `SessionNotFound`.
    """

    def __init__(self, engine: AsyncEngine, *, clock: Clock = SYSTEM_CLOCK) -> None:
        db = Database(engine, clock=clock)
        for role in (
            SqlSessions,
            SqlHistory,
            SqlPlatformMessages,
            SqlHistorySearch,
            SqlChatEvents,
            SqlClaims,
        ):
            role.__init__(self, db)

    async def close(self) -> None:
        await self._db.close()

    @property
    def database(self) -> Database:
        """The store's transactions and whole jobs, for the tables kept next to it
        (`storage.jobs`)."""
        return self._db

    @property
    def engine(self) -> AsyncEngine:
        """The store's engine, for the shared state kept next to it (`storage.rate_limits`)."""
        return self._db.engine

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> PruneResult:
        """Apply the policy of `storage.retention`; platform messages, reactions and update
        ids default to the same cutoff."""
        cutoff = utc(older_than)
        events_cutoff = cutoff if events_older_than is None else utc(events_older_than)
        async with self._db.write() as conn:
            return await prune_rows(conn, cutoff, events_cutoff)


def _satisfies_the_ports(store: SqlStore) -> ConversationStore:
    """Checked by mypy: the store implements `bot.store_ports.ConversationStore`."""
    return store
