"""The relays of the outgoing messenger: each a `Messenger` that wraps the Telegram sender.

- `MessengerRelay` hands every call to the one it wraps; the relays below (and the
  told-user book) subclass it and override only the calls they change.
- `ClosedChatGuard` sends nothing to a chat the bot was removed or kicked from
  (`bot.services.chat_events` marks it closed; `ClosedChats` caches the answer).
- `RefusedSendLog` records every send the Bot API refused in the error log
  (`bot.services.error_log`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from bot.errors import TelegramError, TelegramForbidden
from bot.ports import BubbleHook, Delivery, Messenger
from bot.services.error_log import ErrorLog
from bot.store_ports import ChatEventStore

log = logging.getLogger("tgbot.chat_events")


class MessengerRelay:
    """Forwards every `Messenger` call to `inner` unchanged."""

    def __init__(self, inner: Messenger) -> None:
        self.inner = inner

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        return await self.inner.send_text(
            chat_id, text, thread_id=thread_id, reply_to=reply_to, on_bubble=on_bubble
        )

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        await self.inner.delete_message(chat_id, message_id)

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        await self.inner.set_reaction(chat_id, message_id, emoji)

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        return await self.inner.is_chat_admin(chat_id, user_id)

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        return await self.inner.send_photo(chat_id, photo, caption=caption, thread_id=thread_id)


class ChatClosed(TelegramForbidden):
    """Nothing is sent to a chat the bot was removed or kicked from."""


class ClosedChats:
    """Whether a chat is closed, as the guard asks it on every send: read from the store at
    most once per `ttl` seconds per chat (a query per bubble cost answered turns a third of
    their throughput), while this process's own membership changes (`note`) count at once.
    A kick handled by another worker counts within `ttl`; a send in that gap is refused by
    Telegram itself (the bot is no longer a member)."""

    def __init__(
        self,
        store: ChatEventStore,
        *,
        ttl: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.monotonic = monotonic
        self._known: dict[int, tuple[bool, float]] = {}

    async def is_chat_closed(self, chat_id: int) -> bool:
        now = self.monotonic()
        known = self._known.get(chat_id)
        if known is not None and now - known[1] < self.ttl:
            return known[0]
        if len(self._known) >= 10_000:
            self._known.clear()
        closed = await self.store.is_chat_closed(chat_id)
        self._known[chat_id] = (closed, now)
        return closed

    def note(self, chat_id: int, closed: bool) -> None:
        self._known[chat_id] = (closed, self.monotonic())


class ClosedChatGuard(MessengerRelay):
    """A `Messenger` that sends nothing to a chat the bot was removed or kicked from.

    The app wraps its one messenger in this, so every outbound path passes it; `is_closed`
    answers from the store or through `ClosedChats`. `send_text` reports an undelivered
    `Delivery` (like a refused send); the other actions raise `ChatClosed`, which tools
    report to the model as an error.
    """

    def __init__(self, inner: Messenger, is_closed: Callable[[int], Awaitable[bool]]) -> None:
        super().__init__(inner)
        self.is_closed = is_closed

    async def _closed(self, chat_id: int, action: str) -> bool:
        if await self.is_closed(chat_id):
            log.info("not sending %s to chat %s: the bot was removed from it", action, chat_id)
            return True
        return False

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        if await self._closed(chat_id, "a message"):
            return Delivery(
                message_ids=(None,), texts=(text,), error=ChatClosed(f"chat {chat_id} is closed")
            )
        return await self.inner.send_text(
            chat_id, text, thread_id=thread_id, reply_to=reply_to, on_bubble=on_bubble
        )

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        if await self._closed(chat_id, "a deletion"):
            raise ChatClosed(f"chat {chat_id} is closed")
        await self.inner.delete_message(chat_id, message_id)

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        if await self._closed(chat_id, "a reaction"):
            raise ChatClosed(f"chat {chat_id} is closed")
        await self.inner.set_reaction(chat_id, message_id, emoji)

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        if await self._closed(chat_id, "a photo"):
            raise ChatClosed(f"chat {chat_id} is closed")
        return await self.inner.send_photo(chat_id, photo, caption=caption, thread_id=thread_id)


class RefusedSendLog(MessengerRelay):
    """A `Messenger` that records every send the Bot API refused in the error log."""

    def __init__(self, inner: Messenger, errors: ErrorLog) -> None:
        super().__init__(inner)
        self.errors = errors

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        delivery = await self.inner.send_text(
            chat_id, text, thread_id=thread_id, reply_to=reply_to, on_bubble=on_bubble
        )
        if delivery.error is not None:
            self.errors.refused_send(chat_id, delivery.error)
        return delivery

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        try:
            return await self.inner.send_photo(chat_id, photo, caption=caption, thread_id=thread_id)
        except TelegramError as exc:
            self.errors.refused_send(chat_id, exc)
            raise
