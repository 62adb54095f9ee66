"""`tgbot run`: long polling (or a webhook) against the configured Bot API, with the scheduler.

SIGTERM / SIGINT stop taking updates (polling stops; the webhook answers 503 and closes after
the requests in flight), then the turns already running finish (`InboundService.drain`)
before the process exits. The chat lock comes from the database URL: asyncio locks on SQLite
(one worker), PostgreSQL advisory locks for several workers on one database.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from bot.config import Settings
from bot.services.retention import RetentionPolicy

log = logging.getLogger("tgbot.run")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def retention_policy(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(
        keep_records_days=settings.retention.keep_records_days,
        keep_platform_events_days=settings.retention.keep_platform_events_days,
    )


async def serve(settings: Settings, *, webhook: bool, host: str, port: int) -> int:
    from adapters.telegram.app import build_bot, build_dispatcher
    from adapters.telegram.sender import TelegramMessenger
    from bot.main import build_app, open_chat_lock, open_store, start_daily_summary
    from bot.services.retention import retention_loop

    assert settings.bot_token is not None
    store = await open_store(settings)
    chat_lock = open_chat_lock(settings)
    bot = build_bot(settings.bot_token.get_secret_value(), settings.telegram_api_base)
    scheduler = None
    stopped = asyncio.Event()
    retention: asyncio.Task[None] | None = None
    try:
        me = await bot.get_me()
        messenger = TelegramMessenger(bot)
        app = build_app(
            settings,
            store=store,
            messenger=messenger,
            bot_id=me.id,
            bot_name=me.first_name or me.username or "tgbot",
            chat_lock=chat_lock,
        )
        dispatcher = build_dispatcher(
            app.inbound, bot_id=me.id, bot_username=me.username, locale=settings.bot_locale
        )
        scheduler = start_daily_summary(app, messenger)
        retention = asyncio.create_task(
            retention_loop(store, retention_policy(settings), app.runner.clock, stop=stopped)
        )
        # before the first update: finish or close the turns a crash interrupted
        await app.inbound.recover_interrupted(bot_id=me.id, bot_username=me.username)
        loop = asyncio.get_running_loop()
        if webhook:
            from adapters.telegram.webhook import serve_webhook

            log.info("bot @%s (%s) started; webhook mode", me.username, me.id)
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
            )
        else:
            log.info(
                "bot @%s (%s) started; polling %s", me.username, me.id, settings.telegram_api_base
            )
            from adapters.telegram.polling_loop import poll_updates

            stop_polling = asyncio.Event()
            for sig in _STOP_SIGNALS:
                loop.add_signal_handler(sig, stop_polling.set)
            # confirms each batch only after it was stored; one chat's updates in order
            await poll_updates(dispatcher, bot, stop=stop_polling)
        log.info("finishing running turns")
        await app.inbound.drain()
        await app.routes.aclose()
    finally:
        stopped.set()
        if retention is not None:
            await retention
        for sig in _STOP_SIGNALS:
            asyncio.get_running_loop().remove_signal_handler(sig)
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        await bot.session.close()
        await chat_lock.close()
        await store.close()
    log.info("stopped")
    return 0
