"""The one app rig: the real wiring (`bot.app.wiring.build_app`) over whatever store,
messenger, clock and model a test brings.

The test bot is id 999 named "Helper" (so "@Helper" mentions it) unless a test running
against the fake Bot API passes that server's identity (`polling_app` does: the app polls
that server in this process). `rig_settings` reads settings the way a deployment does,
with the test defaults: English, no merge window (every message is its own turn) and no
rate limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from adapters.telegram.app import build_bot, build_dispatcher
from adapters.telegram.fake_api import FakeBotApi
from adapters.telegram.sender import TelegramMessenger
from bot.app.wiring import App, build_app
from bot.config import Settings, load_settings
from bot.ports import ChatLock, Clock, LLMProvider, Messenger
from bot.store_ports import ConversationStore

BOT_ID = 999
BOT_NAME = "Helper"

QUIET: dict[str, Any] = {
    "bot_locale": "en",
    "triggers": {"merge_window_seconds": 0},
    "security": {"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
}


def rig_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings on `data_dir` with the `QUIET` defaults; an override replaces a whole
    setting or section (pass `triggers={...}` to set the merge window, for instance)."""
    return load_settings(data_dir=data_dir, **{**QUIET, **overrides})


def wire_app(
    settings: Settings,
    *,
    store: ConversationStore,
    messenger: Messenger,
    model: LLMProvider | None = None,
    clock: Clock | None = None,
    chat_lock: ChatLock | None = None,
    bot_id: int = BOT_ID,
    bot_name: str = BOT_NAME,
) -> App:
    """`build_app` as `tgbot run` calls it, with `model` as the offline default provider."""
    return build_app(
        settings,
        store=store,
        messenger=messenger,
        bot_id=bot_id,
        bot_name=bot_name,
        clock=clock,
        offline=model,
        chat_lock=chat_lock,
    )


@asynccontextmanager
async def polling_app(
    settings: Settings,
    api: FakeBotApi,
    *,
    store: ConversationStore,
    model: LLMProvider | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[App]:
    """The app wired over `store`, polling `api` in this process through aiogram's own
    client and dispatcher, as `@{api.username}`; returns once it polls. On exit polling
    stops, every turn ends, and the routes, the client session and `store` are closed."""
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
        app.inbound, bot_id=api.bot_id, bot_username=api.username, locale="en"
    )
    polls = len(api.calls_of("getUpdates"))
    polling = asyncio.create_task(
        dispatcher.start_polling(
            bot, handle_signals=False, close_bot_session=False, handle_as_tasks=False
        )
    )
    try:
        await api.wait_for_call("getUpdates", polls + 1, timeout=10)  # polling: it can stop
        yield app
    finally:
        await dispatcher.stop_polling()
        await polling
        await app.inbound.drain()
        await app.routes.aclose()
        await bot.session.close()
        await store.close()
