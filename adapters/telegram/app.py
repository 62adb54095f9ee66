"""aiogram wiring: the Bot for an API base URL, and thin routers that hand parsed updates on."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiogram import Bot, Dispatcher, Router
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods import (
    DeleteMessage,
    DeleteWebhook,
    EditMessageText,
    GetMe,
    GetUpdates,
    SendMessage,
    SendPhoto,
    SetMessageReaction,
    SetWebhook,
)
from aiogram.methods.base import Response
from aiogram.types import Message, Update

from adapters.telegram.parsing import parse_update_strict
from adapters.telegram.quote_summaries import Locale
from bot.domain.facts import InboundMessage
from bot.errors import StorageUnavailable
from bot.ports import InboundSink

logger = logging.getLogger(__name__)

ParseErrorHook = Callable[[Update, Exception], Awaitable[None]]

# aiogram reads every reply through `Response[method.__returning__]`, and pydantic keeps
# parametrised models only weakly: once a collection frees one, the next reply rebuilds it
# (about 6 ms of schema building, a fifth of the event loop's time under load). Holding
# the models of the methods we call keeps them built.
_RESPONSE_MODELS = tuple(
    Response[method.__returning__]  # type: ignore[name-defined]
    for method in (
        DeleteMessage,
        DeleteWebhook,
        EditMessageText,
        GetMe,
        GetUpdates,
        SendMessage,
        SendPhoto,
        SetMessageReaction,
        SetWebhook,
    )
)


def build_bot(token: str, api_base: str) -> Bot:
    """An aiogram Bot talking to `api_base` (`{base}/bot{token}/{method}`), no default markup."""
    session = AiohttpSession(api=TelegramAPIServer.from_base(api_base))
    return Bot(token, session=session, default=DefaultBotProperties())


def build_dispatcher(
    sink: InboundSink,
    *,
    bot_id: int,
    bot_username: str | None,
    locale: Locale,
    on_parse_error: ParseErrorHook | None = None,
) -> Dispatcher:
    """A Dispatcher whose routers parse messages and edits and pass them to `sink`."""
    dispatcher = Dispatcher()
    routers = get_routers(
        sink,
        bot_id=bot_id,
        bot_username=bot_username,
        locale=locale,
        on_parse_error=on_parse_error,
    )
    dispatcher.include_routers(*routers)
    return dispatcher


def get_routers(
    sink: InboundSink,
    *,
    bot_id: int,
    bot_username: str | None,
    locale: Locale,
    on_parse_error: ParseErrorHook | None = None,
) -> tuple[Router, ...]:
    """What reacts to what: messages and channel posts are new, edits are edits."""
    inbound = _Inbound(
        sink, bot_id=bot_id, bot_username=bot_username, locale=locale, on_parse_error=on_parse_error
    )
    router = Router(name="inbound")

    @router.message()
    @router.channel_post()
    async def on_message(message: Message, event_update: Update) -> None:
        await inbound.deliver(event_update, edit=False)

    @router.edited_message()
    @router.edited_channel_post()
    async def on_edit(message: Message, event_update: Update) -> None:
        await inbound.deliver(event_update, edit=True)

    return (router,)


class _Inbound:
    """Parse one update and hand it to the sink. A malformed update or a bug in handling is
    logged and skipped (retrying it would block the chat for good); a `StorageUnavailable` is
    raised, so the update is not confirmed and Telegram (or the poller) delivers it again."""

    def __init__(
        self,
        sink: InboundSink,
        *,
        bot_id: int,
        bot_username: str | None,
        locale: Locale,
        on_parse_error: ParseErrorHook | None,
    ) -> None:
        self._sink = sink
        self._bot_id = bot_id
        self._bot_username = bot_username
        self._locale = locale
        self._on_parse_error = on_parse_error

    async def deliver(self, update: Update, *, edit: bool) -> None:
        message = await self._parse(update)
        if message is None:
            return
        try:
            await (self._sink.on_edit(message) if edit else self._sink.on_message(message))
        except StorageUnavailable:
            raise
        except Exception:
            logger.exception("inbound sink failed on update %s", update.update_id)

    async def _parse(self, update: Update) -> InboundMessage | None:
        try:
            return parse_update_strict(
                update, bot_id=self._bot_id, bot_username=self._bot_username, locale=self._locale
            )
        except Exception as exc:
            logger.warning("skipping update %s: %s", update.update_id, exc, exc_info=True)
            if self._on_parse_error is not None:
                try:
                    await self._on_parse_error(update, exc)
                except Exception:
                    logger.exception("on_parse_error hook failed")
            return None
