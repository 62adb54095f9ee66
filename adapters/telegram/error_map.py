"""aiogram's failures mapped into `bot.errors`, by what a caller can do about them: wait
(`TelegramFloodWait`), give up on the chat (`TelegramForbidden`), fix the request
(`TelegramBadRequest`), try again later (`TelegramNetworkError`).

`adapters.telegram.sender.TelegramMessenger` raises only these; a send that goes through
never comes here.
"""

from __future__ import annotations

import aiohttp
from aiogram import exceptions as tg

from bot.errors import (
    TelegramBadRequest,
    TelegramError,
    TelegramFloodWait,
    TelegramForbidden,
    TelegramNetworkError,
)


def map_error(exc: Exception) -> TelegramError:
    """The `bot.errors` branch that says what a caller can do about an aiogram failure."""
    message = str(exc)
    match exc:
        case TelegramError():
            return exc
        case tg.TelegramRetryAfter():
            return TelegramFloodWait(message, retry_after=float(exc.retry_after))
        case tg.TelegramForbiddenError() | tg.TelegramUnauthorizedError():
            return TelegramForbidden(message)
        case tg.TelegramEntityTooLarge() | tg.TelegramBadRequest() | tg.TelegramNotFound():
            return TelegramBadRequest(message)
        case tg.TelegramMigrateToChat() | tg.TelegramConflictError():
            return TelegramBadRequest(message)
        case (
            tg.TelegramNetworkError()
            | tg.TelegramServerError()
            | tg.ClientDecodeError()
            | aiohttp.ClientError()
            | TimeoutError()
        ):
            return TelegramNetworkError(message or type(exc).__name__)
        case _:
            return TelegramError(f"{type(exc).__name__}: {message}")
