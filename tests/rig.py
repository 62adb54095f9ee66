"""The one app rig: the real wiring (`bot.app.wiring.build_app`) over whatever store,
messenger, clock and model a test brings.

The test bot is id 999 named "Helper" (so "@Helper" mentions it) unless a test running
against the fake Bot API passes that server's identity (`tests.polling_rig.polling_app`
does: the app polls that server in this process, through aiogram). `rig_settings` reads
settings the way a deployment does, with the test defaults: English, no merge window (every
message is its own turn) and no rate limits.

The rig imports no Telegram client (aiogram takes seconds to import): a test that only
drives the app in process pays for none of it (tests/test_suite_rules.py checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
