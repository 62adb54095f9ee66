"""Fixtures of the scale-out tests: a fresh PostgreSQL schema (skipped without
TEST_POSTGRES_URL) and a migrated SQLite file."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from storage.migrate import upgrade_database
from tests.test_storage.conftest import reset_postgres

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL")


async def fresh_postgres(*, migrate: bool = True) -> str:
    """TEST_POSTGRES_URL with an empty (and migrated) `public` schema; skips when unset."""
    if POSTGRES_URL is None:
        pytest.skip("TEST_POSTGRES_URL is not set (run under scripts/with-postgres)")
    await reset_postgres(POSTGRES_URL)
    if migrate:
        await upgrade_database(POSTGRES_URL)
    return POSTGRES_URL


@pytest.fixture
async def postgres_url() -> str:
    return await fresh_postgres()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite file migrated to head per session, copied for each test (the migrations
    have their own tests: tests/test_storage/test_migrate.py)."""
    template = tmp_path_factory.mktemp("scaleout-template") / "bot.sqlite3"
    asyncio.run(upgrade_database(f"sqlite+aiosqlite:///{template}"))
    return template


@pytest.fixture
async def sqlite_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    database = tmp_path / "db" / "bot.sqlite3"
    database.parent.mkdir()
    shutil.copyfile(migrated_sqlite, database)
    return f"sqlite+aiosqlite:///{database}"
