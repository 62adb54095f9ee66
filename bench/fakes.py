"""Bench-only doubles: a messenger that confirms every bubble, a clock the bench sets."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from bot.domain.platform_messages import Delivery
from bot.ports import BubbleHook

LIMIT = 4096


@dataclass(slots=True)
class CountingMessenger:
    """Implements `bot.ports.Messenger`: confirms everything with increasing ids."""

    next_id: int = 5_000_000
    sent: int = 0
    deleted: int = 0
    now: datetime | None = None

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        parts = [text[i : i + LIMIT] for i in range(0, len(text), LIMIT)] or [""]
        ids: list[int | None] = [None] * len(parts)
        dates: list[datetime | None] = [None] * len(parts)
        for index in range(len(parts)):
            self.next_id += 1
            self.sent += 1
            ids[index] = self.next_id
            dates[index] = self.now
            if on_bubble is not None:
                await on_bubble(
                    Delivery(message_ids=tuple(ids), texts=tuple(parts), dates=tuple(dates))
                )
        return Delivery(message_ids=tuple(ids), texts=tuple(parts), dates=tuple(dates))

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        self.deleted += 1

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        return None

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        return False

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        self.next_id += 1
        return self.next_id


@dataclass(slots=True)
class SetClock:
    """A clock that shows what the bench set last."""

    current: datetime = field(default_factory=lambda: datetime(2026, 1, 1))

    def now(self) -> datetime:
        return self.current
