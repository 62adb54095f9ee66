"""What tests read from a store beyond what production code asks: a session by id, one
record.

No port names these; they are built here from the store's roles, so they work on any
store. Contract and storage tests take `InspectedStore`, the whole store with the counts its
prune returns, so they test the port, not one of its two implementations."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot.domain.records import StoredRecord
from bot.errors import SessionNotFound
from bot.ports import SessionInfo
from bot.store_ports import ConversationStore, SessionStore
from storage.retention import PruneResult


class InspectedStore(ConversationStore, Protocol):
    """The whole store port, and what tests inspect it with."""

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> PruneResult:
        """`ConversationStore.prune`, with the counts both stores return (`bot/` never reads
        them, so its port says `object`)."""
        ...


async def get_session(store: SessionStore, session_id: int) -> SessionInfo:
    """The session with this id, as stored now."""
    found = next((s for s in await store.list_sessions() if s.id == session_id), None)
    if found is None:
        raise SessionNotFound(f"no session {session_id}")
    return found


async def get_record(store: ConversationStore, record_id: int) -> StoredRecord | None:
    """One record with its aliases (those of its own path), or None."""
    for session in await store.list_sessions():
        try:
            path = await store.load_path(session.id, record_id)
        except SessionNotFound:
            continue
        return path[-1]
    return None


def _both_stores_are_inspected_stores() -> None:
    """Checked by mypy (`mypy tests/store_inspector.py`): both stores satisfy the port."""
    from storage.sql import SqlStore
    from testkit.memory_store import InMemoryStore

    stores: tuple[type[InspectedStore], ...] = (InMemoryStore, SqlStore)
    del stores
