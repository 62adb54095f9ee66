"""`Backend`: what differs between the databases the store runs on, as one value per database.

`storage.sqlite.backend.SQLITE` and `storage.postgres.backend.POSTGRES` are the two values;
`storage.engine.backend_for` picks one by the URL's or connection's database name, once.
Everything outside `storage/sqlite/`, `storage/postgres/` and the executors asks the backend
instead of comparing names: the URL's async driver, how its engine is made, whether several
processes share the database, its sub-plans (`storage.plan.SqlParts`), its whole jobs and
the parts of the migrations that differ (`Migrations`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.plan import SqlParts

if TYPE_CHECKING:
    from storage.sqlite.jobs import WriteGate


class Migrations(Protocol):
    """The statements of the migrations that differ between databases, run with Alembic's
    `op` (passed in: the serving process never imports Alembic)."""

    def create_message_search(self, op: Any) -> None:
        """Migration 0003: the search index's table (and what keeps it in step)."""
        ...

    def index_message(self, event: Any, tokens: list[str]) -> dict[str, Any]:
        """Migration 0003: the parameters of `index_statement` for one stored event (its
        `id`, `chat_id`, `thread_id`) and its tokens (`storage.search.index_tokens`)."""
        ...

    index_statement: Any
    """Migration 0003: the INSERT of one event's index entry."""

    def drop_message_search(self, op: Any) -> None:
        """Migration 0003's downgrade."""
        ...

    def carry_token_corrections(self, op: Any) -> None:
        """Migration 0009: the shared corrections' rows carried over as one worker's rows
        (a database one process uses has none to carry)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """One database the store runs on (see the module docstring)."""

    name: str
    """SQLAlchemy's name of the database (`URL.get_backend_name`, `Dialect.name`)."""
    driver: str
    """The URL's driver name with its async driver (`sqlite+aiosqlite`)."""
    shared: bool
    """Whether several processes may use the database at once (workers on PostgreSQL; a
    SQLite file has one process): shared locks, live channel and books; writers queue in
    the database, not in the process; a pooled connection may be dropped by the server."""
    parts: SqlParts
    engine: Callable[[URL, int], AsyncEngine]
    """The engine for a normalised URL and a busy timeout in ms."""
    readonly_engine: Callable[[URL, int], AsyncEngine]
    """An engine that only reads (the dashboard's)."""
    database_file: Callable[[URL], Path | None]
    """The database's file (None: a server, or in memory)."""
    jobs: Callable[[AsyncEngine, WriteGate | None], Any]
    """The engine's whole jobs (`storage.executor.Jobs`; None: SQLAlchemy's path)."""
    migrations: Migrations
