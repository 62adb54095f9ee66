"""Schema migrations: `upgrade_database(url)` runs Alembic's upgrade to head in-process.

The migration scripts ship inside the package (`storage/migrations`); no `alembic.ini` is
needed on disk. `tgbot db upgrade` and the tests call this; the store never creates tables.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from storage.engine import WRITE, create_engine_for

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(url: str | None = None) -> Config:
    """A Config pointing at the packaged scripts (and at `url`, for the alembic CLI)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    return config


async def upgrade_database(url: str, revision: str = "head") -> None:
    """Create or migrate the schema at `url` up to `revision`."""
    engine = create_engine_for(url)
    try:
        async with engine.connect() as connection:
            connection = await connection.execution_options(**WRITE)
            await connection.run_sync(_upgrade, revision)
            await connection.commit()
    finally:
        await engine.dispose()


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _main() -> int:
    """`storage.schema.upgrade_in_child`'s child: the upgrade, and on failure its reason in
    one line on stderr (the parent shows it)."""
    from storage.schema import URL_VARIABLE

    try:
        asyncio.run(upgrade_database(os.environ[URL_VARIABLE]))
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"{type(exc).__name__}: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
