"""aiogram wiring: the dispatcher and thin routers that hand parsed updates on (the `Bot`
itself is `adapters.telegram.bot_session`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import Dispatcher, Router
from aiogram.dispatcher.event.bases import UNHANDLED
from aiogram.types import (
    ChatMemberUpdated,
    Message,
    MessageReactionUpdated,
    TelegramObject,
    Update,
)

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
