"""Store fixtures: every contract test runs on memory, SQLite (a temp file) and PostgreSQL.

PostgreSQL runs when TEST_POSTGRES_URL is set (scripts/with-postgres); each test gets a
fresh `public` schema, built by the migrations, like SQLite.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.engine import create_engine_for
from storage.memory import InMemoryStore
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from tests.fakes import SteppingClock
from tests.store_inspector import InspectedStore

Store = InspectedStore
"""What the contract tests take: the store port (and the test-side inspection helpers),
not one of its implementations."""

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL")


async def reset_postgres(url: str) -> None:
    engine = create_engine_for(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    finally:
        await engine.dispose()


async def database_url(backend: str, tmp_path: Path) -> str:
    """A freshly migrated database of `backend`."""
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'bot.sqlite3'}"
    else:
        if POSTGRES_URL is None:
            pytest.skip("TEST_POSTGRES_URL is not set (run under scripts/with-postgres)")
        url = POSTGRES_URL
        await reset_postgres(url)
    await upgrade_database(url)
    return url


BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def clock() -> SteppingClock:
    """The stores' clock; tests move it by hand."""
    return SteppingClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))


@pytest.fixture(params=BACKENDS)
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: SteppingClock
) -> AsyncIterator[Store]:
    backend: str = request.param
    if backend == "memory":
        yield InMemoryStore(clock=clock)
        return
    url = await database_url(backend, tmp_path)
    sql_store = SqlStore(create_engine_for(url), clock=clock)
    try:
        yield sql_store
    finally:
        await sql_store.close()


@pytest.fixture(params=SQL_BACKENDS)
async def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await database_url(request.param, tmp_path)
