"""Engine set-up: URL normalisation and the SQLite connection settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from storage.engine import create_engine_for, normalise_url


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite"),
        ("postgres://u@h/db", "postgresql+asyncpg"),
        ("postgresql://u@h/db", "postgresql+asyncpg"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg"),
    ],
    ids=["sqlite", "sqlite-async", "postgres-alias", "postgresql", "asyncpg"],
)
def test_urls_get_their_async_driver(given: str, driver: str) -> None:
    assert normalise_url(given).drivername == driver


async def test_sqlite_file_gets_its_directory_and_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "bot.sqlite3"
    engine = create_engine_for(f"sqlite:///{path}")
    try:
        async with engine.connect() as conn:
            pragmas = {
                name: (await conn.execute(text(f"PRAGMA {name}"))).scalar()
                for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
            }
    finally:
        await engine.dispose()
    assert path.exists()
    assert pragmas == {
        "journal_mode": "wal",
        "foreign_keys": 1,
        "busy_timeout": 0,  # where the loop runs statements (the thread waits 10 s)
        "synchronous": 1,
    }
