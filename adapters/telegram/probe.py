"""Questions an operator's tools ask the Bot API (`tgbot init`, `tgbot doctor`): the bot's
identity and privacy mode (getMe), the updates waiting (never confirmed unless asked),
whether a chat can be reached (getChat) and the webhook (getWebhookInfo)."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from aiogram.exceptions import TelegramBadRequest, TelegramConflictError, TelegramForbiddenError

from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import GetRawUpdates
from adapters.telegram.startup_errors import startup_failure
from bot.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str
    reads_all_group_messages: bool
    """getMe's `can_read_all_group_messages`: privacy mode is off."""


@dataclass(frozen=True, slots=True)
class WebhookState:
    url: str
    pending_updates: int
    last_error: str | None


class TelegramProbe:
    """`async with TelegramProbe(token, api_base) as probe:`; a refused token or an
    unreachable API raises one `ConfigError` line."""

    def __init__(self, token: str, api_base: str) -> None:
        self.api_base = api_base
        try:
            self._bot = build_bot(token, api_base)
        except Exception as exc:
            raise startup_failure(exc, api_base) or exc from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._bot.session.close()

    async def identify(self) -> BotIdentity:
        try:
            me = await self._bot.get_me()
        except Exception as exc:
            raise startup_failure(exc, self.api_base) or exc from None
        return BotIdentity(
            id=me.id,
            username=me.username or str(me.id),
            reads_all_group_messages=bool(me.can_read_all_group_messages),
        )

    async def pending_updates(
        self, *, wait_seconds: int = 0, confirm_below: int | None = None
    ) -> list[dict[str, Any]]:
        """Messages and the bot's membership changes waiting for it, as raw JSON; waits up
        to `wait_seconds` when none is there. Only ids below `confirm_below` are confirmed."""
        method = GetRawUpdates(
            offset=confirm_below,
            timeout=wait_seconds,
            allowed_updates=["message", "my_chat_member"],
        )
        timeout = int((self._bot.session.timeout or 60) + wait_seconds)
        try:
            raw = await self._bot(method, request_timeout=timeout)
        except TelegramConflictError as exc:
            raise ConfigError(
                "getUpdates",
                f"Telegram refused ({exc.message}): a running `tgbot run` or a webhook reads "
                "this bot's updates",
            ) from None
        return [dict(update) for update in raw]

    async def chat_name(self, chat_id: int) -> str | None:
        """The chat's title or the user's name when the bot can reach it; None when
        Telegram says the chat is unknown to the bot (a user who never started it) or the
        bot was blocked."""
        try:
            chat = await self._bot.get_chat(chat_id)
        except (TelegramBadRequest, TelegramForbiddenError):
            return None
        if chat.title:
            return chat.title
        name = " ".join(part for part in (chat.first_name, chat.last_name) if part)
        return name or str(chat_id)

    async def webhook(self) -> WebhookState:
        info = await self._bot.get_webhook_info()
        return WebhookState(
            url=info.url,
            pending_updates=info.pending_update_count,
            last_error=info.last_error_message,
        )
