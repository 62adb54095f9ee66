"""The database commands: `tgbot import-legacy FILE` and `tgbot db upgrade`."""

from __future__ import annotations

import sys
from pathlib import Path

from bot.app.wiring import open_store
from bot.config import load_settings
from bot.errors import ConfigError
from bot.services.legacy_import import import_legacy_rows
from storage.migrate import upgrade_database


async def import_legacy(config: str | None, file: str) -> int:
    settings = load_settings(config)
    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()  # noqa: ASYNC240
    except OSError as exc:
        raise ConfigError("FILE", f"cannot read {file}: {exc.strerror}") from None
    store = await open_store(settings)
    try:
        report = await import_legacy_rows(store, lines)
    finally:
        await store.close()
    for error in report.errors:
        print(error, file=sys.stderr)
    print(f"imported {report.imported} rows into {report.sessions} sessions")
    return 0 if not report.errors else 1


async def db_upgrade(config: str | None) -> int:
    settings = load_settings(config)
    await upgrade_database(settings.resolved_database_url)
    print("database schema is up to date")
    return 0
