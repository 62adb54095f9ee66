"""The retention loop: deleting old records and platform messages, by the configured policy.

Default is to keep everything (both settings 0). With `keep_records_days = N`, records older
than N days that lie before a session's window start are deleted (never the window, never a
record a kept one depends on: see `storage/retention.py`); with
`keep_platform_events_days = M`, platform messages and processed-update ids older than M days
go. The ledger files in `DATA_DIR/agent-traces` are never touched. `tgbot run` applies the
policy at start-up and then once a day (`retention_loop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.ports import Clock
from bot.store_ports import ConversationStore

log = logging.getLogger("tgbot.retention")

DAY = timedelta(days=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    keep_records_days: int = 0
    keep_platform_events_days: int = 0

    @property
    def enabled(self) -> bool:
        return self.keep_records_days > 0 or self.keep_platform_events_days > 0

    def cutoffs(self, now: datetime) -> tuple[datetime, datetime]:
        """(records older than, events older than); the epoch where a kind is kept."""
        records = now - self.keep_records_days * DAY if self.keep_records_days else _EPOCH
        events = (
            now - self.keep_platform_events_days * DAY if self.keep_platform_events_days else _EPOCH
        )
        return records, events


async def apply_retention(
    store: ConversationStore, policy: RetentionPolicy, now: datetime
) -> object:
    """One prune by the policy; None when the policy keeps everything."""
    if not policy.enabled:
        return None
    records, events = policy.cutoffs(now)
    result = await store.prune(records, events_older_than=events)
    log.info("retention: %s", result)
    return result


async def retention_loop(
    store: ConversationStore, policy: RetentionPolicy, clock: Clock, *, stop: asyncio.Event
) -> None:
    """Prune now, then every day until `stop`; a failed prune is logged and tried again
    the next day."""
    if not policy.enabled:
        return
    while not stop.is_set():
        try:
            await apply_retention(store, policy, clock.now())
        except Exception:
            log.exception("retention prune failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), DAY.total_seconds())
