"""Whether a database's schema is at the newest migration, read without Alembic, and the
upgrade run in a child process.

`tgbot run` upgrades the schema at every start. Alembic costs ~11 MB of resident memory and
0.1–0.3 s of start-up (measured on the 2-core box), kept for the life of the process that
imports it; one query answers the common case (already current), and a schema to create or
migrate is upgraded by a child process (`upgrade_in_child`), so Alembic never enters the
serving process, on its first start either.
"""

from __future__ import annotations

import asyncio
import os
import sys

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from bot.errors import StorageUnavailable
from storage.engine import create_engine_for

HEAD_REVISION = "0014"
"""The newest revision in storage/migrations/versions (a test keeps the two in step)."""

_VERSION = text("SELECT version_num FROM alembic_version")


async def schema_revision(url: str) -> str | None:
    """The stored revision; None for an empty database (no `alembic_version` table)."""
    engine = create_engine_for(url)
    try:
        async with engine.connect() as conn:
            try:
                return (await conn.execute(_VERSION)).scalar_one_or_none()
            except SQLAlchemyError:
                return None
    finally:
        await engine.dispose()


async def schema_at_head(url: str) -> bool:
    return await schema_revision(url) == HEAD_REVISION


URL_VARIABLE = "TGBOT_MIGRATE_URL"
"""How `upgrade_in_child` hands the URL over: the environment, not the command line, which
any user of the host may read (it may hold a password)."""


async def upgrade_in_child(url: str) -> None:
    """`storage.migrate.upgrade_database(url)` in a child process (`python -m
    storage.migrate`); its failure is `StorageUnavailable` with the child's last words."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "storage.migrate",
        env={**os.environ, URL_VARIABLE: url},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await child.communicate()
    if child.returncode != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        reason = lines[-1] if lines else f"exit status {child.returncode}"
        raise StorageUnavailable(f"the schema upgrade failed: {reason}")
