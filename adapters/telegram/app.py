"""aiogram wiring: the Bot for an API base URL, and thin routers that hand parsed updates on."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import urlencode

from aiogram import Bot, Dispatcher, Router
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.dispatcher.event.bases import UNHANDLED
from aiogram.exceptions import TelegramNetworkError
from aiogram.methods import (
    DeleteMessage,
    DeleteWebhook,
    EditMessageText,
    GetMe,
    GetUpdates,
    SendChatAction,
    SendMessage,
    SendMessageDraft,
    SendPhoto,
    SetMessageReaction,
    SetWebhook,
)
from aiogram.methods.base import Response, TelegramMethod, TelegramType
from aiogram.types import (
    ChatMemberUpdated,
    InputFile,
    Message,
    MessageReactionUpdated,
    TelegramObject,
    Update,
)
from aiohttp import ClientError, ClientTimeout
from aiohttp.payload import BytesPayload

from adapters.telegram.chat_event_parsing import parse_membership, parse_reaction
from adapters.telegram.polling_loop import (
    BATCH_DELIVERY,
    BatchDelivery,
    ParseErrorHook,
    UpdateReader,
)
from adapters.telegram.text_units import Locale
from bot.errors import StorageUnavailable
from bot.ports import ChatEventSink, InboundSink

logger = logging.getLogger(__name__)

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
        SendMessageDraft,
        SendChatAction,
        SendPhoto,
        SetMessageReaction,
        SetWebhook,
    )
)


class _BotSession(AiohttpSession):
    """aiogram's HTTP session, with two savings.

    A request without files goes as an url-encoded body built here: aiogram's `FormData`
    builds a multipart writer for every request (a fresh random boundary, one `getrandom`
    system call) that only a request carrying files uses. The fields and their encoding are
    aiogram's own (`prepare_value`); a request with files goes through aiogram unchanged.

    Closing one that spoke plain HTTP (a local Bot API server, the fake one on 127.0.0.1)
    skips the 250 ms aiogram waits for SSL connections to wind down: there are none."""

    def __init__(self, api_base: str) -> None:
        super().__init__(api=TelegramAPIServer.from_base(api_base))
        self._plain_http = api_base.startswith("http://")

    def _body(self, bot: Bot, method: TelegramMethod[Any]) -> BytesPayload | None:
        """The url-encoded fields of `method`, or `None` when it carries files."""
        files: dict[str, InputFile] = {}
        fields = []
        for key, value in method.model_dump(warnings=False).items():
            prepared = self.prepare_value(value, bot=bot, files=files)
            if prepared:
                fields.append((key, prepared))
        if files:
            return None
        return BytesPayload(
            urlencode(fields).encode(), content_type="application/x-www-form-urlencoded"
        )

    async def make_request(
        self,
        bot: Bot,
        method: TelegramMethod[TelegramType],
        timeout: int | None = None,  # noqa: ASYNC109 (aiogram's signature)
    ) -> TelegramType:
        body = self._body(bot, method)
        if body is None:
            return await super().make_request(bot, method, timeout)
        session = await self.create_session()
        url = self.api.api_url(token=bot.token, method=method.__api_method__)
        try:
            total = self.timeout if timeout is None else timeout
            async with session.post(url, data=body, timeout=ClientTimeout(total=total)) as resp:
                raw = await resp.text()
        except TimeoutError as exc:
            raise TelegramNetworkError(method=method, message="Request timeout error") from exc
        except ClientError as exc:
            raise TelegramNetworkError(
                method=method, message=f"{type(exc).__name__}: {exc}"
            ) from exc
        response = self.check_response(bot=bot, method=method, status_code=resp.status, content=raw)
        return cast(TelegramType, response.result)

    async def close(self) -> None:
        if not self._plain_http:
            await super().close()
        elif self._session is not None and not self._session.closed:
            await self._session.close()


def build_bot(token: str, api_base: str) -> Bot:
    """An aiogram Bot talking to `api_base` (`{base}/bot{token}/{method}`), no default markup."""
    return Bot(token, session=_BotSession(api_base), default=DefaultBotProperties())


def build_dispatcher(
    sink: InboundSink,
    *,
    bot_id: int,
    bot_username: str | None,
    locale: Locale,
    on_parse_error: ParseErrorHook | None = None,
    chat_events: ChatEventSink | None = None,
) -> Dispatcher:
    """A Dispatcher whose routers parse messages and edits and pass them to `sink` (and the
    bot's membership changes and reactions to `chat_events`, when given), fed through
    `polling_loop.handle_batch` by the poller and the webhook alike. An update no router
    handles is logged and skipped."""
    dispatcher = Dispatcher()
    routers = get_routers(
        sink,
        bot_id=bot_id,
        bot_username=bot_username,
        locale=locale,
        on_parse_error=on_parse_error,
        chat_events=chat_events,
    )
    dispatcher.include_routers(*routers)
    reader = UpdateReader(
        bot_id=bot_id, bot_username=bot_username, locale=locale, on_parse_error=on_parse_error
    )
    dispatcher.workflow_data[BATCH_DELIVERY] = BatchDelivery(reader, sink.on_messages)
    dispatcher.update.outer_middleware(_log_unhandled)
    return dispatcher


async def _log_unhandled(
    handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
    event: TelegramObject,
    data: dict[str, Any],
) -> Any:
    """Say why an update went nowhere: no router asked for its kind."""
    result = await handler(event, data)
    if result is UNHANDLED and isinstance(event, Update):
        try:
            kind = event.event_type
        except Exception:  # a kind newer than this aiogram build
            kind = "unknown"
        logger.info("skipping update %s: nothing handles %s updates", event.update_id, kind)
    return result


def get_routers(
    sink: InboundSink,
    *,
    bot_id: int,
    bot_username: str | None,
    locale: Locale,
    on_parse_error: ParseErrorHook | None = None,
    chat_events: ChatEventSink | None = None,
) -> tuple[Router, ...]:
    """What reacts to what: messages and channel posts are new, edits are edits; with
    `chat_events`, the bot's membership changes and reactions go there. Only kinds with a
    handler are asked for (`allowed_updates` follows these routers)."""
    reader = UpdateReader(
        bot_id=bot_id, bot_username=bot_username, locale=locale, on_parse_error=on_parse_error
    )
    inbound = _Inbound(sink, reader)
    router = Router(name="inbound")

    @router.message()
    @router.channel_post()
    async def on_message(message: Message, event_update: Update) -> None:
        await inbound.deliver(event_update, edit=False)

    @router.edited_message()
    @router.edited_channel_post()
    async def on_edit(message: Message, event_update: Update) -> None:
        await inbound.deliver(event_update, edit=True)

    if chat_events is None:
        return (router,)
    chats = Router(name="chat_events")
    events = _ChatEvents(chat_events)

    @chats.my_chat_member()
    async def on_membership(member: ChatMemberUpdated, event_update: Update) -> None:
        await events.membership(member, event_update.update_id)

    @chats.message_reaction()
    async def on_reaction(reaction: MessageReactionUpdated, event_update: Update) -> None:
        await events.reaction(reaction, event_update.update_id)

    return (router, chats)


class _ChatEvents:
    """Parse a membership or reaction update and hand it on; failures as in `_Inbound`."""

    def __init__(self, sink: ChatEventSink) -> None:
        self._sink = sink

    async def membership(self, event: ChatMemberUpdated, update_id: int) -> None:
        try:
            change = parse_membership(event, update_id=update_id)
        except Exception:
            logger.warning("skipping my_chat_member update %s", update_id, exc_info=True)
            return
        logger.info("bot %s in chat %s (%s)", change.change, change.chat_id, change.status)
        await self._run_sink(self._sink.on_membership(change), update_id)

    async def reaction(self, event: MessageReactionUpdated, update_id: int) -> None:
        try:
            reaction = parse_reaction(event, update_id=update_id)
        except Exception:
            logger.warning("skipping message_reaction update %s", update_id, exc_info=True)
            return
        await self._run_sink(self._sink.on_reaction(reaction), update_id)

    async def _run_sink(self, call: Awaitable[None], update_id: int) -> None:
        """A failing sink is logged and the update skipped; a store that is down is raised."""
        try:
            await call
        except StorageUnavailable:
            raise
        except Exception:
            logger.exception("chat event sink failed on update %s", update_id)


class _Inbound:
    """Parse one update (`UpdateReader`) and hand it to the sink. A bug in handling is logged
    and skipped (retrying it would block the chat for good); a `StorageUnavailable` or an
    `OSError` (transient) is raised, so the update is not confirmed and Telegram (or the
    poller) delivers it again."""

    def __init__(self, sink: InboundSink, reader: UpdateReader) -> None:
        self._sink = sink
        self._reader = reader

    async def deliver(self, update: Update, *, edit: bool) -> None:
        message = await self._reader.parse(update)
        if message is None:
            return
        try:
            await (self._sink.on_edit(message) if edit else self._sink.on_messages((message,)))
        except (StorageUnavailable, OSError):
            raise
        except Exception:
            logger.exception("inbound sink failed on update %s", update.update_id)
