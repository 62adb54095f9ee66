"""`tgbot db upgrade` creates the schema (SQLite file; PostgreSQL with TEST_POSTGRES_URL)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from bot.errors import StorageUnavailable
from storage.engine import create_engine_for
from storage.migrate import alembic_config, upgrade_database
from storage.schema import HEAD_REVISION, schema_at_head, schema_revision, upgrade_in_child
from tests.test_app.conftest import cli_env, tgbot, tgbot_here

TABLES = {
    "alembic_version",
    "chat_sessions",
    "agent_messages",
    "platform_events",
    "processed_updates",
    "daily_summaries",
}


@pytest.mark.slow  # `tgbot db upgrade`'s one real-process test
async def test_it_creates_the_schema_on_an_empty_sqlite_file(tmp_path: Path) -> None:
    database = tmp_path / "empty.sqlite3"
    database.touch()
    env = cli_env(tmp_path / "data", DATABASE_URL=f"sqlite:///{database}")

    done = await tgbot("db", "upgrade", env=env)
    assert done.code == 0, done.err
    assert done.out.strip().endswith(f"created the schema at revision {HEAD_REVISION} (head)"), (
        done.out
    )
    with sqlite3.connect(database) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    conn.close()
    assert tables >= TABLES
    assert version

    again = await tgbot("db", "upgrade", env=env)  # idempotent, and says so
    assert again.code == 0, again.err
    assert again.out.strip().endswith(f"already at revision {HEAD_REVISION} (head); nothing to do")


async def test_the_default_database_lives_in_the_data_dir(tmp_path: Path) -> None:
    done = await tgbot_here("db", "upgrade", env=cli_env(tmp_path / "data"))
    assert done.code == 0, done.err
    assert (tmp_path / "data" / "tgbot.sqlite3").is_file()


@pytest.mark.postgres
async def test_it_creates_the_schema_on_postgresql(tmp_path: Path) -> None:
    url = os.environ.get("TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TEST_POSTGRES_URL is not set (run under scripts/with-postgres)")
    engine = create_engine_for(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
        done = await tgbot_here("db", "upgrade", env=cli_env(tmp_path, DATABASE_URL=url))
        assert done.code == 0, done.err
        async with engine.connect() as conn:
            tables = set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
        assert tables >= TABLES
    finally:
        await engine.dispose()


async def test_the_start_up_check_knows_the_newest_migration(tmp_path: Path) -> None:
    """`tgbot run` skips Alembic when `schema_at_head`: that must track the scripts."""
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION
    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}"
    assert await schema_revision(url) is None
    assert not await schema_at_head(url)
    await upgrade_database(url)
    assert await schema_at_head(url)


@pytest.mark.slow  # a real child process
async def test_the_serving_process_creates_the_schema_without_importing_alembic(
    tmp_path: Path,
) -> None:
    """`open_store(serving=True)` (what `tgbot run` opens) upgrades a new database in a
    child process: the schema is at head and Alembic (~11 MB resident) never entered the
    serving process."""
    database = tmp_path / "new.sqlite3"
    url = f"sqlite:///{database}"
    script = (
        "import asyncio, sys\n"
        "from bot.app.wiring import open_store\n"
        "from bot.config import load_settings\n"
        f"settings = load_settings(data_dir={str(tmp_path)!r}, database_url={url!r})\n"
        "async def main():\n"
        "    store = await open_store(settings, serving=True)\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=PIPE, stderr=PIPE, env=cli_env(tmp_path / "data")
    )
    out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    assert out.decode().strip() == "[]"
    assert await schema_revision(url) == HEAD_REVISION


@pytest.mark.slow  # a real child process
async def test_a_failed_upgrade_in_the_child_is_storage_unavailable_with_its_reason(
    tmp_path: Path,
) -> None:
    not_a_database = tmp_path / "notes.sqlite3"
    not_a_database.write_text("these are notes, not a database\n" * 200)
    with pytest.raises(StorageUnavailable, match=r"schema upgrade failed: .*not a database"):
        await upgrade_in_child(f"sqlite:///{not_a_database}")
