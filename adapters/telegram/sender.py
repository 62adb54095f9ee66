"""Outbound Telegram: split text into bubbles, send them as replies, map aiogram errors."""

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
from aiogram.types import BufferedInputFile, Message, ReactionTypeEmoji, ReplyParameters

from adapters.telegram.text_units import prefix_fitting, safe_cut, utf16_len
from bot.errors import (
    TelegramBadRequest,
    TelegramError,
    TelegramFloodWait,
    TelegramForbidden,
    TelegramNetworkError,
)
from bot.ports import BubbleHook, Delivery

logger = logging.getLogger(__name__)

TELEGRAM_TEXT_LIMIT = 4096
DEFAULT_MAX_FLOOD_WAIT = 10.0

# Where a bubble may end, best first. Each pattern matches the separator after the cut.
_BOUNDARIES: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n[ \t]*\n\s*"),  # paragraph
    re.compile(r"\n\s*"),  # line
    re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；])\s*"),  # sentence
    re.compile(r"[ \t\u3000]+"),  # word
)


def split_text(text: str, limit: int = TELEGRAM_TEXT_LIMIT) -> tuple[str, ...]:
    """Bubbles of at most `limit` UTF-16 units, cut at the best boundary that fills half a bubble.

    Prefers paragraph, then line, then sentence, then word boundaries; a run with none of
    them is cut hard, but never inside a character or a grapheme cluster. Whitespace at the
    cuts is dropped; an empty or blank text gives no bubbles.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 UTF-16 units")
    bubbles: list[str] = []
    rest = text.strip()
    while rest:
        if utf16_len(rest) <= limit:
            bubbles.append(rest)
            break
        fit = prefix_fitting(rest, limit)
        end, resume = _best_cut(rest, fit)
        bubble = rest[:end].rstrip()
        if bubble:
            bubbles.append(bubble)
        rest = rest[resume:].lstrip()
    return tuple(bubbles)


def _best_cut(text: str, fit: int) -> tuple[int, int]:
    """(end of this bubble, start of the next) for a window of `fit` characters."""
    floor = fit // 2
    for pattern in _BOUNDARIES:
        best: tuple[int, int] | None = None
        for match in pattern.finditer(text, floor, fit + 1):
            if match.start() > 0 and floor <= match.start() <= fit:
                best = (match.start(), match.end())
        if best is not None:
            return best
    cut = safe_cut(text, fit)
    return cut, cut


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
    ) -> None:
        self._bot = bot
        self._limit = limit
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
        """Send the bubbles in order, each replying to `reply_to`; stop at the first failure.

        Never raises for a Telegram failure: the failure that stopped delivery is
        `Delivery.error`, and the slots it left unsent are `None`. `on_bubble` gets the
        delivery so far after each confirmed bubble (its own errors propagate).
        """
        bubbles = split_text(text, self._limit)
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
                await on_bubble(Delivery(message_ids=tuple(ids), texts=bubbles, dates=tuple(dates)))
        return Delivery(message_ids=tuple(ids), texts=bubbles, dates=tuple(dates), error=error)

    async def _send_bubble(
        self, chat_id: int, text: str, thread_id: int, reply_to: int | None
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
