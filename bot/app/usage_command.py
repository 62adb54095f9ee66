"""`tgbot usage report`: the per-day usage report from the ledger (read-only).

Reads the settings and the ledger files, and the feedback reactions from the database,
opened read-only exactly as the dashboard opens it (`storage.engine.create_readonly_engine`):
nothing is migrated, created or touched, a running bot's write-ahead log is shared (its
newest reactions count), and without a running bot the file is read as it stands. So the
report and the dashboard's overview give the same answer. A SQLite file is read only when it
exists; the store is imported only then, so the command still starts quickly.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TextIO

from bot.config import Settings, load_settings
from bot.errors import ConfigError, StorageError
from bot.services.usage_render import FeedbackSource, run_usage_report

log = logging.getLogger("tgbot.usage")


def usage_report(
    config: str | None,
    *,
    days: int,
    since: str | None,
    as_json: bool,
    chat: int | None,
    out: TextIO | None = None,
) -> int:
    settings = load_settings(config)
    since_date = None
    if since is not None:
        try:
            since_date = date.fromisoformat(since)
        except ValueError:
            raise ConfigError("--since", f"expected YYYY-MM-DD, got {since!r}") from None
    return run_usage_report(
        settings.traces_dir,
        zone=settings.zone,
        today=datetime.now(UTC).astimezone(settings.zone).date(),
        days=None if since_date else days,
        since=since_date,
        as_json=as_json,
        chat=chat,
        out=out or sys.stdout,
        feedback=feedback_source(settings),
        currency=settings.ledger.currency,
    )


def feedback_source(settings: Settings) -> FeedbackSource | None:
    """Reactions on the bot's messages for the report's days, from the database opened
    read-only; None when there is no database yet."""
    url = settings.resolved_database_url
    sqlite_path = _sqlite_path(url)
    if sqlite_path is not None and not sqlite_path.exists():
        return None

    def read(days: list[date]) -> Iterable[tuple[datetime, int, str]]:
        start = datetime.combine(days[0], time(), settings.zone)
        end = datetime.combine(days[-1] + timedelta(days=1), time(), settings.zone)
        try:
            return asyncio.run(_read_reactions(url, start, end))
        except StorageError as exc:
            log.warning("feedback reactions not read: %s", exc)
            return ()

    return read


async def _read_reactions(
    url: str, start: datetime, end: datetime
) -> list[tuple[datetime, int, str]]:
    from storage.engine import create_readonly_engine
    from storage.sql import SqlStore

    store = SqlStore(create_readonly_engine(url))  # the dashboard's read-only open
    try:
        found = await store.reactions_between(start, end)
    finally:
        await store.close()
    return [(r.created_at, r.chat_id, r.emoji) for r in found]


def _sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    return Path(parsed.database or "").expanduser()
