"""Alembic environment: runs on the connection `storage.migrate` hands over, or on its own.

`storage.migrate.upgrade_database` passes a live connection in `config.attributes`; the
`alembic` command line (with `sqlalchemy.url` set) gets an async engine of its own.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import storage.jobs
import storage.tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from storage.engine import create_engine_for
from storage.search import outside_the_search_index

target_metadata = SQLModel.metadata


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies tables
        compare_type=True,
        include_name=outside_the_search_index,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_engine_for(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure_and_run)
            await connection.commit()
    finally:
        await engine.dispose()


def _run_offline(url: str) -> None:
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    config = context.config
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _configure_and_run(given)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url, or call storage.migrate.upgrade_database(url)")
    if context.is_offline_mode():
        _run_offline(url)
    else:
        asyncio.run(_run_with_own_engine(url))


_main()
