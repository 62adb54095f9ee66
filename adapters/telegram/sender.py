"""Outbound Telegram: the model's Markdown as formatted bubbles sent as replies; aiogram errors
mapped into `bot.errors`."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import aiohttp
from aiogram import Bot
from aiogram import exceptions as tg
from aiogram.enums import ChatMemberStatus
from aiogram.methods import SendMessageDraft
from aiogram.types import (
    BufferedInputFile,
    Message,
    MessageEntity,
    ReactionTypeEmoji,
    ReplyParameters,
)

from adapters.telegram.markdown_entities import (
    DEFAULT_CUT_NOTE,
    TELEGRAM_TEXT_LIMIT,
    Bubble,
    plan_bubbles,
    plan_reply,
)
from bot.errors import (
    TelegramBadRequest,
    TelegramError,
    TelegramFloodWait,
    TelegramForbidden,
    TelegramNetworkError,
)
from bot.ports import BubbleHook, Delivery

logger = logging.getLogger(__name__)

DEFAULT_MAX_FLOOD_WAIT = 10.0
# Telegram's answer when it rejects a message's entities ("Bad Request: can't parse
# entities: ..."); the bubble then goes again as plain text.
_ENTITIES_REJECTED = re.compile(r"can'?t parse entities|cannot parse entities", re.IGNORECASE)

Sleep = Callable[[float], Awaitable[None]]


class TelegramMessenger:
    """`bot.ports.Messenger` over an aiogram `Bot`."""

    def __init__(
        self,
        bot: Bot,
        *,
        limit: int = TELEGRAM_TEXT_LIMIT,
        max_flood_wait: float = DEFAULT_MAX_FLOOD_WAIT,
        sleep: Sleep = asyncio.sleep,
        cut_note: str = DEFAULT_CUT_NOTE,
    ) -> None:
        self._bot = bot
        self._limit = limit
        self._cut_note = cut_note
        self._max_flood_wait = max_flood_wait
        self._sleep = sleep

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        """Send `text` (the model's Markdown) as formatted bubbles in order, each replying to
        `reply_to`; stop at the first failure.

        Each bubble carries Telegram entities (no parse mode, nothing escaped); one whose
        entities Telegram rejects goes again as the same plain text. `Delivery.texts` hold
        the Markdown each bubble came from, as the model wrote it. Never raises for a
        Telegram failure: the failure that stopped delivery is `Delivery.error`, and the
        slots it left unsent are `None`. `on_bubble` gets the delivery so far after each
        confirmed bubble (its own errors propagate).
        """
        # at most MAX_BUBBLES_PER_REPLY bubbles; parsed in a thread so other chats go on
        bubbles = await asyncio.to_thread(plan_reply, text, self._limit, cut_note=self._cut_note)
        sources = tuple(bubble.source for bubble in bubbles)
        ids: list[int | None] = [None] * len(bubbles)
        dates: list[datetime | None] = [None] * len(bubbles)
        error: Exception | None = None
        for index, bubble in enumerate(bubbles):
            try:
                sent = await self._send_bubble(chat_id, bubble, thread_id, reply_to)
            except TelegramError as exc:
                logger.warning(
                    "bubble %d/%d to chat %s failed: %s", index + 1, len(bubbles), chat_id, exc
                )
                error = exc
                break
            ids[index] = sent.message_id
            dates[index] = _utc(sent.date)
            if on_bubble is not None:
                await on_bubble(Delivery(message_ids=tuple(ids), texts=sources, dates=tuple(dates)))
        return Delivery(message_ids=tuple(ids), texts=sources, dates=tuple(dates), error=error)

    async def _send_bubble(
        self, chat_id: int, bubble: Bubble, thread_id: int, reply_to: int | None
    ) -> Message:
        entities = [MessageEntity(**entity.to_api()) for entity in bubble.entities]
        try:
            return await self._send_plain_or_formatted(
                chat_id, bubble.text, entities or None, thread_id, reply_to
            )
        except TelegramBadRequest as exc:
            if not entities or not _ENTITIES_REJECTED.search(str(exc)):
                raise
            logger.warning(
                "chat %s rejected the entities of a bubble (%s); sending it as plain text",
                chat_id,
                exc,
            )
        return await self._send_plain_or_formatted(chat_id, bubble.text, None, thread_id, reply_to)

    async def _send_plain_or_formatted(
        self,
        chat_id: int,
        text: str,
        entities: list[MessageEntity] | None,
        thread_id: int,
        reply_to: int | None,
    ) -> Message:
        reply = (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )
        retried = False
        while True:
            try:
                return await self._bot.send_message(
                    chat_id=chat_id,
                    text=text,
                    entities=entities,
                    message_thread_id=thread_id or None,
                    reply_parameters=reply,
                )
            except tg.TelegramRetryAfter as exc:
                if retried or exc.retry_after > self._max_flood_wait:
                    raise map_error(exc) from exc
                retried = True
                await self._sleep(float(exc.retry_after))
            except Exception as exc:
                raise map_error(exc) from exc

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        try:
            await self._bot.delete_message(chat_id=chat_id, message_id=message_id)
        except Exception as exc:
            raise map_error(exc) from exc

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        try:
            await self._bot.set_message_reaction(
                chat_id=chat_id, message_id=message_id, reaction=[ReactionTypeEmoji(emoji=emoji)]
            )
        except Exception as exc:
            raise map_error(exc) from exc

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        """`getChatMember`: the creator or an administrator."""
        try:
            member = await self._bot.get_chat_member(chat_id=chat_id, user_id=user_id)
        except Exception as exc:
            raise map_error(exc) from exc
        return member.status in (ChatMemberStatus.CREATOR, ChatMemberStatus.ADMINISTRATOR)

    async def send_draft(
        self, chat_id: int, draft_id: int, text: str, *, thread_id: int = 0
    ) -> None:
        """`sendMessageDraft`: the reply so far, formatted like the final message (its first
        bubble: a draft is one message)."""
        bubble = plan_bubbles(text[: 2 * self._limit], self._limit)[0]  # one bubble's worth
        entities = [MessageEntity(**entity.to_api()) for entity in bubble.entities]
        try:
            await self._bot(
                SendMessageDraft(
                    chat_id=chat_id,
                    draft_id=draft_id,
                    text=bubble.text,
                    entities=entities or None,
                    message_thread_id=thread_id or None,
                )
            )
        except Exception as exc:
            raise map_error(exc) from exc

    async def send_typing(self, chat_id: int, *, thread_id: int = 0) -> None:
        """`sendChatAction(typing)`, in the topic when `thread_id` is set."""
        try:
            await self._bot.send_chat_action(
                chat_id=chat_id, action="typing", message_thread_id=thread_id or None
            )
        except Exception as exc:
            raise map_error(exc) from exc

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        try:
            sent = await self._bot.send_photo(
                chat_id=chat_id,
                photo=BufferedInputFile(photo, filename="image.png"),
                caption=caption or None,
                message_thread_id=thread_id or None,
            )
        except Exception as exc:
            raise map_error(exc) from exc
        return sent.message_id


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


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
