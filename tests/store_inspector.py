"""What tests read from a store beyond its ports: a session by id, a whole branch, one
record. The stores keep these (the benches read whole branches too), but no port names
them: production code reads history only through the windowed ports of
`bot.store_ports`. Contract and storage tests take `InspectedStore`, the whole store port
plus these, so they test the port, not one of its two implementations."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot.domain.records import StoredRecord
from bot.ports import SessionInfo
from bot.store_ports import ConversationStore
from storage.retention import PruneResult


class StoreInspector(Protocol):
    async def get_session(self, session_id: int) -> SessionInfo:
        """The session with this id (`SessionNotFound` when there is none)."""
        ...

    async def load_path(
        self, session_id: int, leaf_id: int | None = None
    ) -> tuple[StoredRecord, ...]:
        """The whole branch root → `leaf_id` (the active leaf by default), with aliases,
        ignoring the window start."""
        ...

    async def get_record(self, record_id: int) -> StoredRecord | None:
        """One record with its aliases (those of its own path), or None."""
        ...


class InspectedStore(ConversationStore, StoreInspector, Protocol):
    """The whole store port, and what tests inspect it with."""

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> PruneResult:
        """`Prunable.prune`, with the counts both stores return (`bot/` never reads them,
        so its port says `object`)."""
        ...


def _both_stores_are_inspected_stores() -> None:
    """Checked by mypy (`mypy tests/store_inspector.py`): both stores satisfy the port."""
    from storage.memory import InMemoryStore
    from storage.sql import SqlStore

    stores: tuple[type[InspectedStore], ...] = (InMemoryStore, SqlStore)
    del stores
