"""The database commands: `tgbot import-legacy FILE` and `tgbot db upgrade`."""

from __future__ import annotations

import sys
from pathlib import Path

from bot.app.preflight import check_database_url, mask_url, opening_database
from bot.app.wiring import open_store
from bot.config import load_settings
from bot.errors import ConfigError
from bot.services.legacy_import import import_legacy_rows
from storage.migrate import upgrade_database
from storage.schema import HEAD_REVISION, schema_revision


async def import_legacy(config: str | None, file: str) -> int:
    settings = load_settings(config)
    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()  # noqa: ASYNC240
    except OSError as exc:
        raise ConfigError("FILE", f"cannot read {file}: {exc.strerror}") from None
    async with opening_database(check_database_url(settings)):
        store = await open_store(settings)
    try:
        report = await import_legacy_rows(lines, sessions=store, history=store)
    finally:
        await store.close()
    for error in report.errors:
        print(error, file=sys.stderr)
    print(f"imported {report.imported} rows into {report.sessions} sessions")
    return 0 if not report.errors else 1


async def db_upgrade(config: str | None) -> int:
    settings = load_settings(config)
    url = check_database_url(settings)
    async with opening_database(url):
        before = await schema_revision(url)
        if before != HEAD_REVISION:
            await upgrade_database(url)
        after = await schema_revision(url)
    where = mask_url(url)
    if before == after:
        print(f"{where}: already at revision {after} (head); nothing to do")
    elif before is None:
        print(f"{where}: created the schema at revision {after} (head)")
    else:
        print(f"{where}: migrated from revision {before} to {after} (head)")
    return 0
