"""The orphaned-turn scan loop: with several workers, the survivors finish a dead one's turns.

Start-up recovery (`CrashRecovery.recover`) covers a single process, which finds its own
interrupted turns when it starts again. With several workers on PostgreSQL a worker killed
mid-turn may never start again, so each running worker calls
`CrashRecovery.recover_orphans` every `runtime.orphan_scan_seconds` (±20 %, so workers
started together do not scan in step) until `stop`. What counts as orphaned, and why a turn
is still answered only once, is in `bot.services.recovery`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from datetime import timedelta

from bot.app.wiring import App
from bot.services.inbound_rules import BotIdentity
from bot.services.recovery import CrashRecovery

log = logging.getLogger("tgbot.inbound")

JITTER = 0.2
"""Each wait is the interval times a factor drawn from [1 - JITTER, 1 + JITTER]."""
GRACE_MARGIN = timedelta(seconds=10)
"""Beyond the merge window: how long a stored trigger may wait for its turn to take the
chat's lock (a loaded worker, a slow lock connection) before the scan may take it."""


def orphan_grace(merge_window_seconds: float) -> timedelta:
    """How long the scan must have seen a trigger waiting before it may run its turn."""
    return timedelta(seconds=merge_window_seconds) + GRACE_MARGIN


async def orphan_scan_loop(
    recovery: CrashRecovery,
    bot: BotIdentity,
    *,
    every_seconds: float,
    grace: timedelta,
    stop: asyncio.Event,
    draw: Callable[[], float] = random.random,
) -> None:
    """Scan every `every_seconds` (jittered) until `stop`; a failed scan is logged and the
    next one tries again."""
    while not stop.is_set():
        wait = every_seconds * (1 - JITTER + 2 * JITTER * draw())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)
        if stop.is_set():
            return
        try:
            await recovery.recover_orphans(bot, grace=grace)
        except Exception:
            log.exception("orphaned-turn scan failed")


def start_orphan_scan(
    app: App, bot: BotIdentity, *, stop: asyncio.Event
) -> asyncio.Task[None] | None:
    """The scan as a task when several workers may share the database (`app.topology`);
    None for one process, which recovers its own turns at start-up."""
    settings = app.settings
    if not app.topology.shared:
        return None
    return asyncio.create_task(
        orphan_scan_loop(
            app.recovery,
            bot,
            every_seconds=settings.runtime.orphan_scan_seconds,
            grace=orphan_grace(settings.triggers.merge_window_seconds),
            stop=stop,
        ),
        name="orphan-scan",
    )
