"""aiogram's start-up failures (a malformed token, a refused token, an unreachable Bot API)
translated into one `ConfigError` line naming the setting."""

from __future__ import annotations

from aiogram.exceptions import TelegramNetworkError, TelegramNotFound, TelegramUnauthorizedError
from aiogram.utils.token import TokenValidationError

from bot.errors import ConfigError


def startup_failure(exc: BaseException, api_base: str) -> ConfigError | None:
    """One line for a Bot API that refused the token or could not be reached; None for any
    other exception (the caller re-raises it)."""
    if isinstance(exc, TokenValidationError):
        return ConfigError("BOT_TOKEN", "malformed: expected <bot id>:<secret>")
    if isinstance(exc, TelegramUnauthorizedError | TelegramNotFound):
        return ConfigError("BOT_TOKEN", f"refused by {api_base} (getMe: {exc.message})")
    if isinstance(exc, TelegramNetworkError | OSError | TimeoutError):
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return ConfigError("TELEGRAM_API_BASE", f"cannot reach {api_base}: {text}")
    return None
