"""The outgoing messenger chain: the relays that wrap the Telegram sender, and the told-user
book they fill.

- `MessengerRelay` hands every call to the one it wraps; the relays below subclass it and
  override only the calls they change.
- `ClosedChatGuard` sends nothing to a chat the bot was removed or kicked from
  (`bot.services.chat_events` marks it closed; `ClosedChats` caches the answer).
- `RefusedSendLog` records every send the Bot API refused in the error log
  (`bot.services.error_log`).
- `ToldUserMessenger` notes what it delivers in the `ToldUser` book.

`[Already told the user]` (the told-user book): what the bot sent in a chat outside a model
turn.

Command outputs (`/usage`, `/context`, …), rate-limit refusals, restart and recovery notices
and the daily summary are sent by services, not by the model, so the model would otherwise
not know the chat has seen them. `ToldUserMessenger` wraps the messenger those services use
and notes one line per message sent (its first line, whitespace collapsed, at most 120
characters; a `SecretText`, such as the owner's login link, only as its redacted form:
`bot.services.told_lines`); the
next model turn there is shown the chat's newest 5 (`peek`) and they are
forgotten once a turn that carried them succeeds (`shown`): a turn that fails keeps them for
the next one, and its failure notice is noted too.

`ToldUser` is the one book every path uses (the runtime, the services' messenger, the
scheduled summary) and the rule is the same in both of its forms: a line is shown to every
turn until one that carried it is answered, then forgotten; lines noted meanwhile stay.

- One process (SQLite): kept in memory (`ToldUserLog`), per chat and thread. A restart loses
  only notes not yet shown, and what a restart itself announces is sent (and noted) by the
  new process. Storing them would mean a query over the bot's platform messages without a
  record on every turn, for a block that matters only until the next reply.
- Several workers (PostgreSQL): the table every worker reads (`bot.ports.SharedToldNotes`,
  `storage.told_notes`). `peek` reads without forgetting and remembers up to which row it
  read; `shown` confirms up to there. Turns of one chat never overlap across workers (the
  turn lock), so the turn that peeked is the one that confirms. The database away never
  fails a turn or a command: the lines are then missed (or shown once more), and logged.

See docs/architecture.md, Rendering a message.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence

from bot.domain.platform_messages import Delivery
from bot.errors import TelegramError, TelegramForbidden
from bot.ports import BubbleHook, Messenger, SharedToldNotes
from bot.services.error_log import ErrorLog
from bot.services.told_lines import retold, told_line
from bot.store_ports import ChatEventStore

log = logging.getLogger("tgbot.chat_events")
told_log = logging.getLogger("tgbot.told_user")


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


# ------------------------------------------------------------------ what the user was told

MAX_LINES = 5
MAX_CHATS = 10_000


class ToldUserLog:
    """The newest lines sent outside model turns, per (chat, thread)."""

    def __init__(self, *, max_chats: int = MAX_CHATS) -> None:
        self._lines: OrderedDict[tuple[int, int], deque[str]] = OrderedDict()
        self._max_chats = max_chats

    def note(self, chat_id: int, thread_id: int, text: str) -> None:
        line = told_line(retold(text))
        if not line:
            return
        key = (chat_id, thread_id)
        lines = self._lines.pop(key, None) or deque(maxlen=MAX_LINES)
        lines.append(line)
        self._lines[key] = lines
        while len(self._lines) > self._max_chats:
            self._lines.popitem(last=False)

    def take(self, chat_id: int, thread_id: int = 0) -> tuple[str, ...]:
        """The chat's lines since the last take, oldest first; forgets them."""
        lines = self._lines.pop((chat_id, thread_id), None)
        return tuple(lines) if lines else ()

    def shown(self, chat_id: int, thread_id: int, lines: Sequence[str]) -> None:
        """A turn that carried `lines` succeeded: forget them (lines noted meanwhile stay)."""
        kept = self._lines.get((chat_id, thread_id))
        if kept is None:
            return
        for line in lines:
            with contextlib.suppress(ValueError):
                kept.remove(line)
        if not kept:
            del self._lines[(chat_id, thread_id)]

    def peek(self, chat_id: int, thread_id: int = 0) -> tuple[str, ...]:
        """The same without forgetting (for `tgbot context show`)."""
        return tuple(self._lines.get((chat_id, thread_id), ()))


class ToldUser:
    """`[Already told the user]` for the runtime and the messengers: in memory (`log`), or in
    the workers' shared table when `shared` is set (see the module docstring)."""

    def __init__(self, shared: SharedToldNotes | None = None) -> None:
        self.log = ToldUserLog()
        self.shared = shared
        self._read: dict[tuple[int, int], int] = {}
        """Shared: the newest row each chat's running turn was shown."""

    async def note(self, chat_id: int, thread_id: int, text: str) -> None:
        text = retold(text)
        if self.shared is None:
            self.log.note(chat_id, thread_id, text)
            return
        try:
            await self.shared.note(chat_id, thread_id, told_line(text))
        except Exception as exc:  # the message was delivered; only the note is missed
            told_log.warning("told-user note for chat %d not stored (%s)", chat_id, exc)

    async def peek(self, chat_id: int, thread_id: int = 0) -> tuple[str, ...]:
        """The chat's lines not yet shown to an answered turn, oldest first."""
        if self.shared is None:
            return self.log.peek(chat_id, thread_id)
        try:
            taken = await self.shared.take(chat_id, thread_id)
        except Exception as exc:
            told_log.warning("told-user notes of chat %d unreadable (%s)", chat_id, exc)
            return ()
        if taken.upto is None:
            self._read.pop((chat_id, thread_id), None)
        else:
            self._read[(chat_id, thread_id)] = taken.upto
        return taken.lines

    async def shown(self, chat_id: int, thread_id: int, lines: Sequence[str]) -> None:
        """A turn that carried `lines` was answered: forget them (not what came meanwhile)."""
        if self.shared is None:
            self.log.shown(chat_id, thread_id, lines)
            return
        upto = self._read.pop((chat_id, thread_id), None)
        if upto is None or not lines:
            return
        try:
            await self.shared.confirm(chat_id, thread_id, upto)
        except Exception as exc:
            told_log.warning("told-user notes of chat %d not confirmed (%s)", chat_id, exc)


class ToldUserMessenger(MessengerRelay):
    """A `Messenger` that notes what it delivers in a `ToldUser` book."""

    def __init__(self, inner: Messenger, told: ToldUser) -> None:
        super().__init__(inner)
        self.told = told

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
        if delivery.delivered:
            await self.told.note(chat_id, thread_id, text)
        return delivery

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        message_id = await self.inner.send_photo(
            chat_id, photo, caption=caption, thread_id=thread_id
        )
        await self.told.note(chat_id, thread_id, caption or "[chart]")
        return message_id
