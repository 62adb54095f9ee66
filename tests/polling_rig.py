"""The app rig polling a fake Bot API in this process, through aiogram's HTTP client and
the polling loop `tgbot run` polls with (`adapters/telegram/polling_loop.py`), so updates
take production's path into the inbound service (kept apart from `tests.rig`, which imports
no Telegram client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from bot.app.wiring import App
from bot.config import Settings
from bot.ports import Clock, LLMProvider
from bot.store_ports import ConversationStore
from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline
from tests.rig import wire_app


@asynccontextmanager
async def polling_app(
    settings: Settings,
    api: FakeBotApi,
    *,
    store: ConversationStore,
    model: LLMProvider | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[App]:
    """The app wired over `store`, polling `api` in this process as `tgbot run` does, as
    `@{api.username}`; returns once it polls. On exit polling stops (the last batch
    confirmed), every turn ends, and the routes, the client session and `store` are
    closed."""
    bot = build_bot(api.token, api.base_url)
    app = wire_app(
        settings,
        store=store,
        messenger=TelegramMessenger(bot),
        model=model,
        clock=clock,
        bot_id=api.bot_id,
        bot_name=api.first_name,
    )
    dispatcher = build_dispatcher(
        app.inbound,
        bot_id=api.bot_id,
        bot_username=api.username,
        locale="en",
        chat_events=app.chat_events,
    )
    polls = len(api.calls_of("getUpdates"))
    stop = asyncio.Event()
    polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop))
    try:
        await api.wait_for_call(
            "getUpdates", polls + 1, timeout=deadline(EVENT)
        )  # polling: it can stop
        yield app
    finally:
        stop.set()
        await polling
        await app.inbound.drain()
        await app.routes.aclose()
        await bot.session.close()
        await store.close()
