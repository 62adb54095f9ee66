"""Serving `tgbot run`: long polling or a webhook against the configured Bot API, with the
daily-summary scheduler, the retention loop and, on PostgreSQL, the orphaned-turn scan.

SIGTERM / SIGINT stop taking updates (polling stops; the webhook answers 503 and closes after
the requests in flight), then the turns already running finish (`InboundService.drain`)
before the process exits; during start-up they stop it, closing what was opened. What
differs between one process and several workers (the chat lock, the send pacing, the live
channel, the orphaned-turn scan) comes from the `Topology` (`bot.app.topology`). An update
that does not validate is recorded in the update log (`claim_update`) and passed. The steps
of start-up and shutdown are `bot.app.startup`'s; this module is the serving itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from adapters.http_guard import limit_repeated_logs, raise_file_limit
from adapters.telegram.app import build_dispatcher
from adapters.telegram.polling_loop import AfterBatchHook, poll_updates
from adapters.telegram.webhook import serve_webhook
from adapters.telegram.webhook_watch import watch_webhook
from bot.agent.turn_log import TurnLog, TurnTotals
from bot.app.preflight import (
    check_bot_token,
    check_data_dir,
    check_database_url,
    check_offline,
)
from bot.app.startup import (
    StopSignals,
    open_app,
    setup_logging,
    skipped_updates,
    start_serving,
    uncancel,
    webhook_secret,
)
from bot.app.telemetry import start_tracing
from bot.app.wiring import register_settings_secrets
from bot.config import Settings, load_settings
from bot.errors import ConfigError

if TYPE_CHECKING:
    from adapters.otel import OtelTracer

log = logging.getLogger("tgbot.run")


async def serve(
    settings: Settings,
    *,
    webhook: bool,
    host: str,
    port: int,
    tracing: OtelTracer | None = None,
    after_batch: AfterBatchHook | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; `after_batch` runs after each stored batch of polled
    updates, before its offset is confirmed (a test entry point crashes there).

    Every part is entered once on one exit stack, so however serving ends (a stop signal,
    a start-up step that fails part-way, an error while serving) what was opened closes in
    reverse order: the orphaned-turn scan stops, the running turns finish, then the
    background loops, the dashboard, the runtime, the MCP servers, the connections and the
    store close."""
    token = check_bot_token(settings, "run")
    url = check_database_url(settings)
    raise_file_limit()  # idle sockets must not run the process out of file handles
    limit_repeated_logs()
    totals: TurnTotals | None = None
    with StopSignals() as signals:
        async with AsyncExitStack() as stack:
            if tracing is not None:  # released last: the spans of the whole stop are sent
                stack.push_async_callback(tracing.aclose)
            try:
                opened = await open_app(stack, settings, token=token, url=url, tracing=tracing)
                app, bot = opened.app, opened.bot
                observer = app.runner.observer
                totals = observer.totals if isinstance(observer, TurnLog) else None
                # with chat_events, allowed_updates asks for my_chat_member and
                # message_reaction too
                dispatcher = build_dispatcher(
                    app.inbound,
                    bot_id=opened.bot_id,
                    bot_username=opened.identity.username,
                    locale=settings.fallback_locale,
                    chat_events=app.chat_events,
                )
                health = await start_serving(stack, opened, webhook=webhook, host=host, port=port)
                signals.started()  # from here a signal stops taking updates
                if webhook:
                    # Telegram's word on its deliveries: /healthz and the watchdog read it
                    watcher = asyncio.create_task(watch_webhook(bot, health, stop=signals.stop))
                    try:
                        await serve_webhook(
                            dispatcher,
                            bot,
                            host=host,
                            port=port,
                            stop=signals.stop,
                            secret=webhook_secret(settings),
                            public_url=settings.webhook_url,
                            on_skipped=skipped_updates(app),
                            health=health,
                        )
                    finally:
                        watcher.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await watcher
                else:  # each batch confirmed only after it was stored; one chat's in order
                    await poll_updates(
                        dispatcher,
                        bot,
                        stop=signals.stop,
                        on_skipped=skipped_updates(app),
                        after_batch=after_batch,
                        health=health,
                        poll_seconds=settings.telegram.poll_seconds,
                        grace_seconds=settings.telegram.poll_grace_seconds,
                    )
            except asyncio.CancelledError:
                if not signals.cut_start_short:
                    raise
                uncancel()  # before the stack closes: nothing pending cuts a close short
                log.info("stop signal during start-up; closing what was opened")
            finally:
                signals.started()  # however start-up ended, a signal never cuts a close short
    # uptime, turns, tokens and cost: what this run did, as the last line of its log
    log.info("%s", "stopped" if totals is None else totals.line())
    return 0


async def run(
    config: str | None,
    *,
    webhook: bool,
    host: str,
    port: int,
    insecure_webhook: bool = False,
    offline: bool = False,
    after_batch: AfterBatchHook | None = None,
) -> int:
    settings = load_settings(config)
    check_bot_token(settings, "run")
    if webhook and settings.webhook_secret is None and not insecure_webhook:
        # without the secret header check anyone who finds the URL can post forged updates
        raise ConfigError(
            "WEBHOOK_SECRET",
            "required for `tgbot run --webhook` (or pass --insecure-webhook to accept "
            "unauthenticated updates)",
        )
    check_offline(settings, offline=offline)
    check_database_url(settings)
    check_data_dir(settings.data_dir, create=True)
    tracing = start_tracing(os.environ)  # None without OTEL_EXPORTER_OTLP_ENDPOINT
    register_settings_secrets(settings)  # before the first log line
    setup_logging(settings.tgbot_log_level)
    return await serve(
        settings,
        webhook=webhook,
        host=host,
        port=port,
        tracing=tracing,
        after_batch=after_batch,
    )
