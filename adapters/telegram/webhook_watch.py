"""With a webhook, whether Telegram still delivers: `getWebhookInfo` every `every_seconds`.

A webhook bot receives nothing when Telegram cannot reach it (a certificate, a proxy, a
firewall), and nothing in the process notices: Telegram says so only in `getWebhookInfo`
(`last_error_date`, `last_error_message`). Each answer goes to `UpdateHealth`: an error in
the last `recent_seconds` makes `/healthz` answer 503 with Telegram's words; a clean answer
is a sign of life (it feeds the systemd watchdog). A call that fails feeds nothing, so a bot
cut off from Telegram ages past its bound too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiogram import Bot

from adapters.telegram.update_health import UpdateHealth

log = logging.getLogger(__name__)


async def watch_webhook(
    bot: Bot,
    health: UpdateHealth,
    *,
    stop: asyncio.Event,
    every_seconds: float = 30.0,
    recent_seconds: float = 300.0,
) -> None:
    """Ask `getWebhookInfo` until `stop` is set (at once, then every `every_seconds`)."""
    while not stop.is_set():
        try:
            info = await bot.get_webhook_info()
        except Exception as exc:
            log.warning("getWebhookInfo failed: %s: %s", type(exc).__name__, exc)
        else:
            error = None
            when = info.last_error_date
            if when is not None and time.time() - when.timestamp() <= recent_seconds:
                error = info.last_error_message or "an unnamed delivery error"
                log.error("Telegram reports webhook delivery errors: %s", error)
            health.webhook_checked(error)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_seconds)
