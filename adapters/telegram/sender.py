"""Outbound Telegram: the model's Markdown as formatted bubbles sent as replies; aiogram errors
mapped into `bot.errors` (`adapters.telegram.error_map`).

Every request that puts something in a chat waits for its slot from the `SendPacer`
(Telegram's send limits, `bot.services.send_pacing`): bubbles and photos as messages,
reactions as reactions; typing and drafts go only when the chat is not paused, never queued.
A 429 pauses the chat for its `retry_after` (for every worker) and the request goes again
once, after the pause.

In a channel's direct-messages chat a topic is addressed with `direct_messages_topic_id`,
not `message_thread_id` (Telegram requires it there); whether a chat is one is asked once
(`getChat`) and remembered. Telegram has no chat actions there: typing is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

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

from adapters.telegram.error_map import map_error
from adapters.telegram.markdown_entities import (
    DEFAULT_CUT_NOTE,
    TELEGRAM_TEXT_LIMIT,
    Bubble,
    plan_bubbles,
    plan_reply,
)
from bot.domain.platform_messages import Delivery
from bot.errors import (
    TelegramBadRequest,
    TelegramError,
    TelegramFloodWait,
)
from bot.ports import BubbleHook, PaceKind, SendPacer

logger = logging.getLogger(__name__)

DEFAULT_MAX_FLOOD_WAIT = 10.0
DEFAULT_MAX_PACE_WAIT = 300.0
"""A slot further away than this (a long 429 pause) fails the send with `TelegramFloodWait`
instead of holding the turn."""
KNOWN_CHATS_LIMIT = 4096
"""How many chats' "direct messages or not" answers are remembered."""
PLAN_INLINE_CHARS = 1_000
"""Replies up to this long are cut into bubbles on the event loop (about 1 µs a character,
so at most about a millisecond); longer ones in a thread."""
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
        pacer: SendPacer | None = None,
        max_pace_wait: float = DEFAULT_MAX_PACE_WAIT,
    ) -> None:
        self._bot = bot
        self._limit = limit
        self._cut_note = cut_note
        self._max_flood_wait = max_flood_wait
        self._sleep = sleep
        self._pacer = pacer
        self._max_pace_wait = max_pace_wait
        self._direct_messages: dict[int, bool] = {}
        """Chat id → whether it is a channel's direct-messages chat (`getChat`, once)."""

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
        # at most MAX_BUBBLES_PER_REPLY bubbles; a long reply is parsed in a thread so other
        # chats go on, a short one here (the hop to a thread costs more than parsing it)
        if len(text) <= PLAN_INLINE_CHARS:
            bubbles = plan_reply(text, self._limit, cut_note=self._cut_note)
        else:
            bubbles = await asyncio.to_thread(
                plan_reply, text, self._limit, cut_note=self._cut_note
            )
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
        where = await self._topic(chat_id, thread_id)
        retried = False
        while True:
            await self._pace(chat_id, "message")
            try:
                return await self._bot.send_message(
                    chat_id=chat_id,
                    text=text,
                    entities=entities,
                    reply_parameters=reply,
                    message_thread_id=where[0],
                    direct_messages_topic_id=where[1],
                )
            except tg.TelegramRetryAfter as exc:
                if retried or exc.retry_after > self._max_flood_wait:
                    await self._paused(chat_id, exc)
                    raise map_error(exc) from exc
                retried = True
                await self._wait_out(chat_id, exc)
            except Exception as exc:
                raise map_error(exc) from exc

    async def _pace(self, chat_id: int, kind: PaceKind) -> None:
        """Wait for the chat's slot, then the bot-wide one. A pacer that fails (its database
        is down) is logged and the request goes unpaced: pacing never loses a message."""
        if self._pacer is None:
            return
        try:
            wait = await self._pacer.reserve(chat_id, kind)
        except Exception as exc:
            logger.warning("pacing chat %s failed (%s); sending unpaced", chat_id, exc)
            return
        if wait > self._max_pace_wait:
            raise TelegramFloodWait(
                f"chat {chat_id} is paused for {wait:.0f} s", retry_after=round(wait, 3)
            )
        if wait > 0:
            await self._sleep(wait)
        try:
            wait = await self._pacer.bot_slot()
        except Exception as exc:
            logger.warning("pacing the bot failed (%s); sending unpaced", exc)
            return
        if wait > 0:
            await self._sleep(wait)

    async def _paused(self, chat_id: int, exc: tg.TelegramRetryAfter) -> None:
        """Tell the pacer Telegram's `retry_after`: the chat waits it out, on every worker."""
        if self._pacer is None:
            return
        try:
            await self._pacer.pause(chat_id, float(exc.retry_after))
        except Exception as pause_failed:
            logger.warning("pausing chat %s failed: %s", chat_id, pause_failed)

    async def _wait_out(self, chat_id: int, exc: tg.TelegramRetryAfter) -> None:
        """Before the one retry: with a pacer, the pause (the next slot comes after it);
        without, a plain sleep."""
        logger.info("chat %s: 429, retry after %s s", chat_id, exc.retry_after)
        if self._pacer is None:
            await self._sleep(float(exc.retry_after))
        else:
            await self._paused(chat_id, exc)

    async def _may_show(self, chat_id: int) -> bool:
        if self._pacer is None:
            return True
        try:
            return await self._pacer.may_show(chat_id)
        except Exception as exc:
            logger.warning("pacing chat %s failed (%s); showing anyway", chat_id, exc)
            return True

    async def _topic(self, chat_id: int, thread_id: int) -> tuple[int | None, int | None]:
        """`(message_thread_id, direct_messages_topic_id)` that put a request in the topic:
        the first in a forum, the second in a channel's direct-messages chat."""
        if not thread_id:
            return None, None
        if await self.is_direct_messages(chat_id):
            return None, thread_id
        return thread_id, None

    async def is_direct_messages(self, chat_id: int) -> bool:
        """Whether the chat is a channel's direct-messages chat (asked once with `getChat`;
        an answer that fails counts as no and is asked again next time)."""
        known = self._direct_messages.get(chat_id)
        if known is not None:
            return known
        if chat_id > 0:
            return False
        try:
            chat = await self._bot.get_chat(chat_id=chat_id)
        except Exception as exc:
            logger.info("getChat %s failed (%s); treating it as a forum", chat_id, exc)
            return False
        if len(self._direct_messages) >= KNOWN_CHATS_LIMIT:
            self._direct_messages.clear()
        self._direct_messages[chat_id] = bool(chat.is_direct_messages)
        return self._direct_messages[chat_id]

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        try:
            await self._bot.delete_message(chat_id=chat_id, message_id=message_id)
        except Exception as exc:
            raise map_error(exc) from exc

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        retried = False
        while True:
            await self._pace(chat_id, "reaction")
            try:
                await self._bot.set_message_reaction(
                    chat_id=chat_id,
                    message_id=message_id,
                    reaction=[ReactionTypeEmoji(emoji=emoji)],
                )
                return
            except tg.TelegramRetryAfter as exc:
                if retried or exc.retry_after > self._max_flood_wait:
                    await self._paused(chat_id, exc)
                    raise map_error(exc) from exc
                retried = True
                await self._wait_out(chat_id, exc)
            except Exception as exc:
                raise map_error(exc) from exc

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        """`getChatMember`: the creator or an administrator."""
        try:
            member = await self._bot.get_chat_member(chat_id=chat_id, user_id=user_id)
        except Exception as exc:
            raise map_error(exc) from exc
        return member.status in (ChatMemberStatus.CREATOR, ChatMemberStatus.ADMINISTRATOR)

    async def is_chat_member(self, chat_id: int, user_id: int) -> bool:
        """`getChatMember`: in the chat now (a member, an administrator, the creator, or
        restricted but still a member); implements `bot.services.private_members`'
        `ChatMembership`."""
        try:
            member = await self._bot.get_chat_member(chat_id=chat_id, user_id=user_id)
        except Exception as exc:
            raise map_error(exc) from exc
        if member.status == ChatMemberStatus.RESTRICTED:
            return bool(getattr(member, "is_member", False))
        return member.status in (
            ChatMemberStatus.CREATOR,
            ChatMemberStatus.ADMINISTRATOR,
            ChatMemberStatus.MEMBER,
        )

    async def send_draft(
        self, chat_id: int, draft_id: int, text: str, *, thread_id: int = 0
    ) -> None:
        """`sendMessageDraft`: the reply so far, formatted like the final message (its first
        bubble: a draft is one message)."""
        bubble = plan_bubbles(text[: 2 * self._limit], self._limit)[0]  # one bubble's worth
        entities = [MessageEntity(**entity.to_api()) for entity in bubble.entities]
        if not await self._may_show(chat_id):
            return  # superseded by the next draft or the reply: not worth a wait
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
        """`sendChatAction(typing)`, in the topic when `thread_id` is set; skipped while the
        chat is paused (late typing is useless) and in direct-messages chats (Telegram has no
        chat actions there)."""
        if thread_id and await self.is_direct_messages(chat_id):
            return
        if not await self._may_show(chat_id):
            return
        try:
            await self._bot.send_chat_action(
                chat_id=chat_id, action="typing", message_thread_id=thread_id or None
            )
        except Exception as exc:
            raise map_error(exc) from exc

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        where = await self._topic(chat_id, thread_id)
        await self._pace(chat_id, "message")
        try:
            sent = await self._bot.send_photo(
                chat_id=chat_id,
                photo=BufferedInputFile(photo, filename="image.png"),
                caption=caption or None,
                message_thread_id=where[0],
                direct_messages_topic_id=where[1],
            )
        except Exception as exc:
            raise map_error(exc) from exc
        return sent.message_id


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
