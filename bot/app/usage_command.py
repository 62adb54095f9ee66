"""`tgbot usage report`: the per-day usage report from the ledger (read-only).

Reads only the settings and the ledger files; it wires no store and no adapter, so it starts
in a fraction of a second.
"""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime
from typing import TextIO

from bot.config import load_settings
from bot.errors import ConfigError
from bot.services.usage_render import run_usage_report


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
    )
