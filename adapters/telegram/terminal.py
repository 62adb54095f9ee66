"""The terminal as the bot's chat platform (`tgbot chat`): what the bot would send is printed.

`TerminalMessenger` satisfies `bot.ports.Messenger` for one chat, the owner's private chat:
a reply is cut into the bubbles Telegram would show (`plan_reply`, the sender's own
planner) and each bubble's text is printed as the member would read it; reactions,
deletions and photos are printed as one-line notes. It never calls Telegram: a send to any
other chat is refused with a `TelegramBadRequest` that says so (a tool that posts to a group
reads that as its result). `typed_messages` is the other way: a typed line as the private
messages Telegram would deliver (split past its length limit as its apps split), read by the
Telegram adapter's own parser. `PlatformIds` hands out the message ids of both sides, from a
range Telegram does not use, so turns typed here never collide with the chat's real
messages in a shared database.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import TextIO

from aiogram.types import Update

from adapters.telegram.markdown_entities import DEFAULT_CUT_NOTE, TELEGRAM_TEXT_LIMIT, plan_reply
from adapters.telegram.parsing import parse_update_strict
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale
from bot.domain.platform_messages import Delivery
from bot.errors import TelegramBadRequest
from bot.ports import BubbleHook

_COMMAND = re.compile(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{1,64})?")
"""What Telegram marks as a `bot_command` entity at the start of a message."""

TERMINAL_IDS_FROM = 1 << 52
"""Telegram's message ids are a chat's own counter (far below 2**31); ids typed in the
terminal start above 2**52 (still exact in a JavaScript number, so the dashboard shows them)."""


class PlatformIds:
    """Message ids for one terminal session: above `TERMINAL_IDS_FROM`, starting at the
    session's start in milliseconds, so a later session starts above an earlier one's
    (a turn takes far longer than a millisecond an id)."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._next = TERMINAL_IDS_FROM + (
            start_ms if start_ms is not None else time.time_ns() // 1_000_000
        )

    def take(self) -> int:
        taken = self._next
        self._next += 1
        return taken


def split_like_telegram(text: str, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """`text` as the messages a Telegram app sends for it: pieces of at most `limit`
    characters, cut after the last line break or space in a piece's second half when there
    is one; nothing is lost but the whitespace at the cuts."""
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = max(window.rfind("\n"), window.rfind(" "))
        if cut < limit // 2:
            cut = limit
        piece, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if piece:
            pieces.append(piece)
    if rest:
        pieces.append(rest)
    return pieces


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    """Who types: the owner, in their private chat with the bot (chat id = user id)."""

    id: int
    name: str
    language_code: str | None = None


def typed_messages(
    text: str,
    *,
    owner: Owner,
    ids: PlatformIds,
    at: datetime,
    bot_username: str | None,
    locale: Locale,
) -> list[InboundMessage]:
    """One typed line as the private messages Telegram would deliver (several past
    Telegram's length limit), read by the adapter's own parser. No update id: the bot's
    update log is Telegram's, and these never came from it."""
    messages: list[InboundMessage] = []
    for piece in split_like_telegram(text):
        message_id = ids.take()
        body: dict[str, object] = {
            "message_id": message_id,
            "date": int(at.timestamp()),
            "chat": {"id": owner.id, "type": "private", "first_name": owner.name},
            "from": {
                "id": owner.id,
                "is_bot": False,
                "first_name": owner.name,
                **({"language_code": owner.language_code} if owner.language_code else {}),
            },
            "text": piece,
        }
        if command := _COMMAND.match(piece):
            body["entities"] = [{"type": "bot_command", "offset": 0, "length": command.end()}]
        update = Update.model_validate({"update_id": 0, "message": body})
        parsed = parse_update_strict(update, bot_id=0, bot_username=bot_username, locale=locale)
        assert parsed is not None  # a text message always parses to one
        messages.append(dataclasses.replace(parsed, update_id=None))
    return messages


class TerminalMessenger:
    """`bot.ports.Messenger` that prints the owner's chat to `out` (see the module)."""

    def __init__(
        self,
        out: TextIO,
        *,
        chat_id: int,
        ids: PlatformIds,
        now: Callable[[], datetime],
        styled: bool = False,
        limit: int = TELEGRAM_TEXT_LIMIT,
        cut_note: str = DEFAULT_CUT_NOTE,
    ) -> None:
        self._out = out
        self.chat_id = chat_id
        self.ids = ids
        self._now = now
        self._styled = styled
        self._limit = limit
        self._cut_note = cut_note

    def _check_chat(self, chat_id: int, action: str) -> None:
        if chat_id != self.chat_id:
            raise TelegramBadRequest(
                f"cannot {action} in chat {chat_id}: `tgbot chat` has no Telegram connection "
                "and shows only the owner's private chat"
            )

    def note(self, text: str) -> None:
        """A line about the chat, not from it: dim on a terminal."""
        line = f"\x1b[2m{text}\x1b[0m" if self._styled else text
        self._out.write(line + "\n")
        self._out.flush()

    def prompt(self) -> None:
        """The prompt before a line is typed (on a terminal only)."""
        self._out.write("> ")
        self._out.flush()

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        """Print `text` as the bubbles Telegram would show; a chat other than the owner's is
        refused as Telegram refuses a send (`Delivery.error`, nothing printed)."""
        bubbles = plan_reply(text, self._limit, cut_note=self._cut_note)
        sources = tuple(bubble.source for bubble in bubbles)
        try:
            self._check_chat(chat_id, "send a message")
        except TelegramBadRequest as exc:
            return Delivery(message_ids=(None,) * len(bubbles), texts=sources, error=exc)
        ids: list[int | None] = [None] * len(bubbles)
        dates: list[datetime | None] = [None] * len(bubbles)
        for index, bubble in enumerate(bubbles):
            self._out.write(bubble.text + "\n")
            self._out.flush()
            ids[index] = self.ids.take()
            dates[index] = self._now()
            if on_bubble is not None:
                await on_bubble(Delivery(message_ids=tuple(ids), texts=sources, dates=tuple(dates)))
        return Delivery(message_ids=tuple(ids), texts=sources, dates=tuple(dates))

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        self._check_chat(chat_id, "delete a message")
        self.note(f"(the bot deleted message {message_id})")

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        self._check_chat(chat_id, "react")
        self.note(f"(the bot reacted {emoji})" if emoji else "(the bot took its reaction back)")

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        self._check_chat(chat_id, "ask who administers the chat")
        return False  # a private chat has no administrators

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        self._check_chat(chat_id, "send a photo")
        self.note(f"(a photo, {len(photo):,} bytes{': ' + caption if caption else ''})")
        return self.ids.take()
