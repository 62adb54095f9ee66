"""The packaged migrations build exactly the schema `storage.tables` declares."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import storage.jobs  # noqa: F401  (its tables on SQLModel.metadata, as the migrations' env has them)
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.search import outside_the_search_index


def _differences(connection: Connection) -> list[Any]:
    """Differences from the models, but for the search index (`storage.search` owns it,
    outside the models: an FTS5 table and its shadow tables, or a tsvector table)."""
    context = MigrationContext.configure(
        connection,
        opts={
            "compare_type": True,
            "include_name": outside_the_search_index,
        },
    )
    return list(compare_metadata(context, SQLModel.metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_upgrade_is_idempotent_and_matches_the_models(sql_url: str) -> None:
    await upgrade_database(sql_url)  # the fixture already ran it once
    engine = create_engine_for(sql_url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_differences) == []
            assert await conn.run_sync(_tables) >= {
                "chat_sessions",
                "agent_messages",
                "platform_events",
                "processed_updates",
                "daily_summaries",
                "alembic_version",
            }
    finally:
        await engine.dispose()
