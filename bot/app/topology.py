"""One process or several workers: the one place that tells them apart, by the database URL.

A SQLite database (or the in-memory store) is one process (`LocalTopology`): the chat lock
is asyncio locks, rate limits, `[Already told the user]` notes and token corrections live in
this process's memory, sends are paced in memory, nothing is published to other workers and
nobody else can leave an orphaned turn. A PostgreSQL database may be shared by any number of
`tgbot run` workers (`SharedTopology`): each of those parts lives in PostgreSQL behind the
same port, so the workers count, lock and learn as one (docs/architecture.md, Several
workers).

`topology_for(store)` decides once per process; the wiring and `tgbot run` ask the topology
for each part and never look at the URL themselves. The parts that hold connections of their
own (the chat lock, the live channel) are opened by whoever owns their lifetime (`serve`),
which closes them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.ports import ChatLock, RateLimits, SendPacer, SharedTokenCorrections, SharedToldNotes
from bot.services.send_pacing import LocalSendPacer, PaceLimits
from bot.services.turn_scheduler import LocalChatLock
from bot.store_ports import ConversationStore
from storage.engine import is_shared, normalise_url
from storage.postgres.live_channel import PgLiveChannel
from storage.postgres.locks import MIGRATION_LOCK_ID, AdvisoryChatLock
from storage.rate_limits import SqlRateLimits
from storage.send_pacing import SqlSendPacer
from storage.sql import SqlStore
from storage.token_corrections import SqlTokenCorrections
from storage.told_notes import SqlToldNotes


class Topology(ABC):
    """The parts that differ between one process and several workers on one database."""

    shared: bool
    """Whether other workers may share the database (and leave orphaned turns to scan for)."""

    @abstractmethod
    def chat_lock(self) -> ChatLock:
        """Per-chat serialisation; the caller closes it."""

    @abstractmethod
    def live_channel(self) -> PgLiveChannel | None:
        """Live events between the workers (every dashboard shows all); the caller closes it."""

    @abstractmethod
    def rate_limits(self, *, per_user: int, per_chat: int) -> RateLimits | None:
        """Shared rate-limit buckets; None: the inbound service keeps its own counts."""

    @abstractmethod
    def told_notes(self) -> SharedToldNotes | None:
        """Shared `[Already told the user]` notes; None: `ToldUserLog` keeps them in memory."""

    @abstractmethod
    def token_corrections(self) -> SharedTokenCorrections | None:
        """Where every worker's token corrections meet; None: the JSON file alone."""

    @abstractmethod
    def send_pacer(self, limits: PaceLimits) -> SendPacer:
        """Telegram's send limits, counted where every worker's sends count."""


class LocalTopology(Topology):
    """One process: everything in memory."""

    shared = False

    def chat_lock(self) -> ChatLock:
        return LocalChatLock()

    def live_channel(self) -> PgLiveChannel | None:
        return None

    def rate_limits(self, *, per_user: int, per_chat: int) -> RateLimits | None:
        return None

    def told_notes(self) -> SharedToldNotes | None:
        return None

    def token_corrections(self) -> SharedTokenCorrections | None:
        return None

    def send_pacer(self, limits: PaceLimits) -> SendPacer:
        return LocalSendPacer(limits)


class SharedTopology(Topology):
    """Several workers on one PostgreSQL database: the tables share the store's engine; the
    chat lock and the live channel open connections of their own."""

    shared = True

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._url = engine.url.render_as_string(hide_password=False)

    def chat_lock(self) -> ChatLock:
        return AdvisoryChatLock.for_url(self._url)

    def live_channel(self) -> PgLiveChannel | None:
        return PgLiveChannel.for_url(self._url)

    def rate_limits(self, *, per_user: int, per_chat: int) -> RateLimits | None:
        return SqlRateLimits(self._engine, per_user=per_user, per_chat=per_chat)

    def told_notes(self) -> SharedToldNotes | None:
        return SqlToldNotes(self._engine)

    def token_corrections(self) -> SharedTokenCorrections | None:
        return SqlTokenCorrections(self._engine)  # each worker its own rows

    def send_pacer(self, limits: PaceLimits) -> SendPacer:
        if limits.off:  # no budget to share: a round trip per send would count nothing, and
            return LocalSendPacer(limits)  # each worker waits out the 429s it is told itself
        return SqlSendPacer(self._engine, limits)


def _shared(url: URL) -> bool:
    """The decision: SQLite is one process; any other database may have several workers."""
    return is_shared(url)


def topology_for(store: ConversationStore) -> Topology:
    """The topology of the database `store` keeps its data in (the in-memory store: local)."""
    if isinstance(store, SqlStore) and _shared(store.engine.url):
        return SharedTopology(store.engine)
    return LocalTopology()


@asynccontextmanager
async def one_migration_at_a_time(url: str) -> AsyncIterator[None]:
    """Around a schema upgrade of `url`: workers starting together on a shared database
    migrate one after the other (an advisory lock); one process has nobody to wait for."""
    if not _shared(normalise_url(url)):
        yield
        return
    migrations = AdvisoryChatLock.for_url(url)
    try:
        async with migrations.hold_id(MIGRATION_LOCK_ID):
            yield
    finally:
        await migrations.aclose()
