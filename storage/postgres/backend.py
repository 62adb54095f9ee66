"""PostgreSQL as the store's backend (`storage.backend.Backend`): its engine (asyncpg) and its
parts of the migrations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.backend import Backend
from storage.postgres.jobs import FastPostgres
from storage.postgres.parts import POSTGRES as POSTGRES_PARTS
from storage.reconnect import POOL_RECYCLE_SECONDS

POOL_SIZE = 15


def create_engine(parsed: URL, busy_timeout_ms: int) -> AsyncEngine:
    """The asyncpg engine (the busy timeout is SQLite's: PostgreSQL waits on row locks)."""
    # no pre-ping (a round trip per checkout): recycled, and retried on a dropped
    # connection by the store (`storage.reconnect`)
    return create_async_engine(
        parsed, pool_recycle=POOL_RECYCLE_SECONDS, pool_size=POOL_SIZE, max_overflow=0
    )


def database_file(parsed: URL) -> Path | None:
    """A server, no file."""
    return None


def whole_jobs(engine: AsyncEngine, gate: object) -> FastPostgres:
    """The whole jobs on raw asyncpg (writers queue on row locks, never on a gate)."""
    return FastPostgres(engine)


class PostgresMigrations:
    """PostgreSQL's parts of the migrations (`storage.backend.Migrations`)."""

    __slots__ = ()
    index_statement = sa.text(
        "INSERT INTO message_search (event_id, chat_id, thread_id, terms) "
        "VALUES (:id, :chat, :thread, array_to_tsvector(CAST(:tokens AS text[])))"
    )

    def create_message_search(self, op: Any) -> None:
        """A tsvector per event (GIN index), deleted with its event by the foreign key."""
        op.create_table(
            "message_search",
            sa.Column(
                "event_id",
                sa.BigInteger(),
                sa.ForeignKey("platform_events.id", ondelete="CASCADE"),
                primary_key=True,
            ),
            sa.Column("chat_id", sa.BigInteger(), nullable=False),
            sa.Column("thread_id", sa.BigInteger(), nullable=False),
            sa.Column("terms", postgresql.TSVECTOR(), nullable=False),
        )
        op.create_index("ix_message_search_chat", "message_search", ["chat_id", "thread_id"])
        op.create_index(
            "ix_message_search_terms", "message_search", ["terms"], postgresql_using="gin"
        )

    def index_message(self, event: Any, tokens: list[str]) -> dict[str, Any]:
        return {
            "id": event.id,
            "chat": event.chat_id,
            "thread": event.thread_id,
            "tokens": sorted(set(tokens)),
        }

    def drop_message_search(self, op: Any) -> None:
        op.drop_table("message_search")

    def carry_token_corrections(self, op: Any) -> None:
        op.execute(
            "INSERT INTO token_correction_workers (route, worker, ratio, samples, updated_at) "
            "SELECT route, 'migrated', ratio, samples, now() FROM token_corrections "
            "WHERE samples > 0"
        )


POSTGRES = Backend(
    name="postgresql",
    driver="postgresql+asyncpg",
    shared=True,
    parts=POSTGRES_PARTS,
    engine=create_engine,
    readonly_engine=create_engine,
    database_file=database_file,
    jobs=whole_jobs,
    migrations=PostgresMigrations(),
)
