"""`tgbot run`: long polling (or a webhook) against the configured Bot API, with the scheduler."""

from __future__ import annotations

import asyncio
import logging
import signal

from bot.config import Settings

log = logging.getLogger("tgbot.run")


async def serve(settings: Settings, *, webhook: bool, host: str, port: int) -> int:
    from adapters.telegram.app import build_bot, build_dispatcher
    from adapters.telegram.sender import TelegramMessenger
    from bot.main import build_app, open_store, start_daily_summary

    assert settings.bot_token is not None
    store = await open_store(settings)
    bot = build_bot(settings.bot_token.get_secret_value(), settings.telegram_api_base)
    try:
        me = await bot.get_me()
        messenger = TelegramMessenger(bot)
        app = build_app(
            settings,
            store=store,
            messenger=messenger,
            bot_id=me.id,
            bot_name=me.first_name or me.username or "tgbot",
        )
        dispatcher = build_dispatcher(
            app.inbound, bot_id=me.id, bot_username=me.username, locale=settings.bot_locale
        )
        scheduler = start_daily_summary(app, messenger)
        log.info("bot @%s (%s) started; polling %s", me.username, me.id, settings.telegram_api_base)
        if webhook:
            from adapters.telegram.webhook import serve_webhook

            await serve_webhook(dispatcher, bot, host=host, port=port)
        else:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(
                    sig, lambda: asyncio.ensure_future(dispatcher.stop_polling())
                )
            await dispatcher.start_polling(bot, handle_signals=False, close_bot_session=False)
        await app.inbound.drain()
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        await app.routes.aclose()
    finally:
        await bot.session.close()
        await store.close()
    return 0
