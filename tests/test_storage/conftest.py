"""Store fixtures: every contract test runs on memory, SQLite (a temp file) and PostgreSQL.

PostgreSQL runs when TEST_POSTGRES_URL is set (scripts/with-postgres); each test gets a
fresh `public` schema, built by the migrations, like SQLite.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from testkit.memory_store import InMemoryStore
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


_SQLITE_TEMPLATE: list[Path] = []
"""One SQLite file migrated to head per session (`_sqlite_template_dir`), copied for each
test: the migrations run once, not before each of some two hundred contract tests (they are
tested on their own in test_migrate.py and tests/test_app/test_db_upgrade.py)."""


@pytest.fixture(scope="session", autouse=True)
def _sqlite_template_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    _SQLITE_TEMPLATE[:] = [tmp_path_factory.mktemp("sqlite-template") / "bot.sqlite3"]


async def database_url(backend: str, tmp_path: Path) -> str:
    """A freshly migrated database of `backend`."""
    if backend == "sqlite":
        (template,) = _SQLITE_TEMPLATE
        if not template.exists():
            await upgrade_database(f"sqlite+aiosqlite:///{template}")
        database = tmp_path / "data" / "bot.sqlite3"
        database.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, database)
        return f"sqlite+aiosqlite:///{database}"
    if POSTGRES_URL is None:
        pytest.skip("TEST_POSTGRES_URL is not set (run under scripts/with-postgres)")
    await reset_postgres(POSTGRES_URL)
    await upgrade_database(POSTGRES_URL)
    return POSTGRES_URL


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
