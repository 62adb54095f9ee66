"""Serving `tgbot run`: long polling or a webhook against the configured Bot API, with the
daily-summary scheduler, the retention loop and, on PostgreSQL, the orphaned-turn scan.

SIGTERM / SIGINT stop taking updates (polling stops; the webhook answers 503 and closes after
the requests in flight), then the turns already running finish (`InboundService.drain`)
before the process exits. The chat lock comes from the database URL: asyncio locks on SQLite
(one worker), PostgreSQL advisory locks for several workers on one database. An update that
does not validate is recorded in the update log (`claim_update`) and passed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

from adapters.http_guard import limit_repeated_logs, raise_file_limit
from adapters.llm.dialects import kind_for
from adapters.telegram.app import build_bot, build_dispatcher
from adapters.telegram.polling_loop import AfterBatchHook, poll_updates
from adapters.telegram.sender import TelegramMessenger
from adapters.telegram.webhook import serve_webhook
from bot.app.heap import settle_heap
from bot.app.mcp_servers import RunningMcp, start_mcp
from bot.app.preflight import (
    check_bot_token,
    check_data_dir,
    check_database_url,
    check_offline,
    describe_telegram_failure,
    mask_url,
    opening_database,
)
from bot.app.recovery_loop import start_orphan_scan
from bot.app.retention_loop import retention_loop
from bot.app.telemetry import start_tracing
from bot.app.wiring import (
    build_app,
    open_chat_lock,
    open_live_channel,
    open_send_pacer,
    open_store,
    register_settings_secrets,
    retention_policy,
    start_daily_summary,
)
from bot.config import Settings, load_settings
from bot.errors import ConfigError
from bot.redact import install_log_scrubbing
from bot.services.error_log import ErrorLog
from bot.services.triggers import BotIdentity
from bot.texts import text as user_text

if TYPE_CHECKING:
    from adapters.otel import OtelTracer
    from bot.app.dashboard.server import RunningDashboard

log = logging.getLogger("tgbot.run")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def start_banner(
    settings: Settings, *, username: str | None, webhook: bool, host: str, port: int
) -> str:
    """The one line `tgbot run` logs once it is up: who, how, which model, where the data
    goes, and the dashboard."""
    mode = f"webhook on {host}:{port}" if webhook else f"polling {settings.telegram_api_base}"
    profile = settings.providers.get(settings.default_provider or "")
    if profile is not None:
        name = f"{settings.default_provider}:{profile.model or settings.llm_model}"
        model = f"model {name} at {profile.base_url}"
        model += _inferred_kind(profile.base_url, profile.kind, "kind")
    elif settings.llm_base_url:
        model = f"model default:{settings.llm_model} at {settings.llm_base_url}"
        model += _inferred_kind(settings.llm_base_url, settings.llm_kind, "LLM_KIND")
    else:
        model = "the offline model: replies are canned"
    if settings.dashboard_port is None:
        dashboard = "dashboard off (DASHBOARD_PORT unset)"
    else:
        bind = "0.0.0.0" if settings.dashboard_token is not None else "127.0.0.1"
        dashboard = (
            f"dashboard {settings.dashboard_url or f'http://{bind}:{settings.dashboard_port}/'}"
        )
    return (
        f"bot @{username} started; {mode}; {model}; database "
        f"{mask_url(settings.resolved_database_url)}; DATA_DIR={settings.data_dir}; {dashboard}"
    )


def _inferred_kind(base_url: str, kind: str | None, setting: str) -> str:
    """What the banner adds when the Messages API was chosen from the URL alone."""
    if kind is None and kind_for(base_url) == "anthropic":
        return f" (Anthropic Messages API, inferred from the URL; {setting} overrides)"
    return ""


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
    updates, before its offset is confirmed (a test entry point crashes there)."""
    token = check_bot_token(settings, "run")
    url = check_database_url(settings)
    raise_file_limit()  # idle sockets must not run the process out of file handles
    limit_repeated_logs()
    async with opening_database(url):
        store = await open_store(settings)
    try:
        chat_lock = open_chat_lock(settings)
        bot = build_bot(token, settings.telegram_api_base)
    except BaseException as exc:
        await store.close()
        failure = describe_telegram_failure(exc, settings.telegram_api_base)
        if failure is None:
            raise
        raise failure from None
    scheduler = None
    stopped = asyncio.Event()
    retention: asyncio.Task[None] | None = None
    orphans: asyncio.Task[None] | None = None
    scan_stopped = asyncio.Event()
    dashboard: RunningDashboard | None = None
    mcp: RunningMcp | None = None
    mcp_reloads: asyncio.Task[None] | None = None
    live = open_live_channel(settings)  # PostgreSQL: this worker's live events for all
    try:
        try:
            me = await bot.get_me()
        except Exception as exc:
            failure = describe_telegram_failure(exc, settings.telegram_api_base)
            if failure is None:
                raise
            raise failure from None
        mcp = await start_mcp(settings)  # None without [[mcp.servers]]: no SDK import
        messenger = TelegramMessenger(
            bot,
            cut_note=user_text(settings.fallback_locale, "reply_cut", count="{count}"),
            pacer=open_send_pacer(settings, store),  # every send, typing and reaction
        )
        app = build_app(
            settings,
            store=store,
            messenger=messenger,
            bot_id=me.id,
            bot_name=me.first_name or me.username or "tgbot",
            chat_lock=chat_lock,
            tracing=tracing,
            extra_tools=mcp.tools if mcp is not None else (),
        )
        if mcp is not None:
            mcp_reloads = asyncio.create_task(mcp.watch_reloads(app.runner.tools, stopped))
        # with chat_events, allowed_updates asks for my_chat_member and message_reaction too
        dispatcher = build_dispatcher(
            app.inbound,
            bot_id=me.id,
            bot_username=me.username,
            locale=settings.fallback_locale,
            chat_events=app.chat_events,
        )

        skipped_log = ErrorLog(settings.traces_dir, settings.zone)

        async def skipped(update_id: int, reason: str) -> None:
            skipped_log.skipped_update(update_id, reason)  # for the dashboard's error list
            await store.claim_update(update_id)

        scheduler = start_daily_summary(app, messenger)
        if live is not None:
            from bot.app.dashboard.live import LivePublisher

            LivePublisher(live).attach(app.bus)
        await app.runner.truth.load_shared()  # the corrections every worker has learned
        if settings.dashboard_port is not None:
            # Deferred: most runs serve no dashboard, and importing it (jinja2,
            # prometheus-client, its views) costs ~7 MB resident and ~0.1-0.3 s of start-up.
            from bot.app.dashboard.server import start_beside_bot

            dashboard = await start_beside_bot(settings, app.bus, live)
        retention = asyncio.create_task(
            retention_loop(store, retention_policy(settings), app.runner.clock, stop=stopped)
        )
        # before the first update: finish or close the turns a crash interrupted
        identity = BotIdentity(id=me.id, username=me.username)
        await app.recovery.recover(identity)
        # PostgreSQL: then, while running, the turns a killed worker left (recovery_loop)
        orphans = start_orphan_scan(app, identity, stop=scan_stopped)
        log.info("start-up objects frozen out of garbage collection: %d", settle_heap())
        loop = asyncio.get_running_loop()
        log.info(
            "%s",
            start_banner(settings, username=me.username, webhook=webhook, host=host, port=port),
        )
        if webhook:
            stop = asyncio.Event()
            for sig in _STOP_SIGNALS:
                loop.add_signal_handler(sig, stop.set)
            secret = settings.webhook_secret
            await serve_webhook(
                dispatcher,
                bot,
                host=host,
                port=port,
                stop=stop,
                secret=secret.get_secret_value() if secret is not None else None,
                public_url=settings.webhook_url,
                on_skipped=skipped,
            )
        else:
            stop_polling = asyncio.Event()
            for sig in _STOP_SIGNALS:
                loop.add_signal_handler(sig, stop_polling.set)
            # confirms each batch only after it was stored; one chat's updates in order
            await poll_updates(
                dispatcher,
                bot,
                stop=stop_polling,
                on_skipped=skipped,
                after_batch=after_batch,
            )
        scan_stopped.set()  # no new turns while the running ones finish
        if orphans is not None:
            await orphans
        log.info("finishing running turns")
        grace = settings.runtime.shutdown_grace_seconds
        try:
            async with asyncio.timeout(grace):
                await app.inbound.drain()
        except TimeoutError:
            log.warning("turns still running after %gs; cancelling them", grace)
            app.inbound.cancel_running()
            await app.inbound.drain()
        await app.runner.aclose()
        await app.routes.aclose()
        await app.ledger.flush()
    finally:
        stopped.set()
        scan_stopped.set()
        if retention is not None:
            await retention
        if mcp_reloads is not None:
            await mcp_reloads
        if mcp is not None:
            await mcp.aclose()  # the servers' processes end with the bot
        if orphans is not None:
            await orphans
        for sig in _STOP_SIGNALS:
            asyncio.get_running_loop().remove_signal_handler(sig)
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        if dashboard is not None:
            await dashboard.close()
        if live is not None:
            await live.close()
        await bot.session.close()
        await chat_lock.close()
        await store.close()
    log.info("stopped")
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
    _setup_logging(settings.tgbot_log_level)
    try:
        return await serve(
            settings,
            webhook=webhook,
            host=host,
            port=port,
            tracing=tracing,
            after_batch=after_batch,
        )
    finally:
        if tracing is not None:  # the spans still batched are sent before the process ends
            await asyncio.to_thread(tracing.shutdown)


def _setup_logging(level: str) -> None:
    """Log to stderr at `level` (`TGBOT_LOG_LEVEL`); secrets scrubbed from every record and
    the HTTP clients' header dumps silenced (`bot.redact`)."""
    install_log_scrubbing()
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # alembic says at INFO every plugin it loads and every migration it runs: start-up noise
    # (`tgbot db upgrade` reports what it did itself); its warnings still show
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))
