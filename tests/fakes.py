"""Test doubles shared by the service and runtime tests: a recording messenger, a clock,
and builders for inbound messages. They satisfy the same ports as the real adapters."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from bot.domain.facts import InboundMessage, Quote, Sender
from bot.domain.platform_messages import Delivery
from bot.errors import TelegramError
from bot.ports import BubbleHook
from testkit.memory_store import InMemoryStore


@dataclass(slots=True)
class SentMessage:
    chat_id: int
    message_id: int
    text: str
    thread_id: int
    reply_to: int | None


@dataclass(slots=True)
class RecordingMessenger:
    """Implements `bot.ports.Messenger`: records everything, assigns increasing ids, and
    fails the bubbles whose number (1-based over all sends) is in `fail_bubbles`.

    `captions[i]` is the caption of `photos[i]`. When set, `fail_text` / `fail_photo` is
    raised by every `send_text` / `send_photo` before anything is recorded."""

    next_id: int = 10_000
    limit: int = 4096
    sent: list[SentMessage] = field(default_factory=list)
    deleted: list[tuple[int, int]] = field(default_factory=list)
    reactions: list[tuple[int, int, str]] = field(default_factory=list)
    photos: list[tuple[int, bytes]] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)
    fail_bubbles: set[int] = field(default_factory=set)
    fail_text: Exception | None = None
    fail_photo: Exception | None = None
    bubbles: int = 0
    admins: dict[int, set[int]] = field(default_factory=dict)
    """chat id → its administrators (what `is_chat_admin` answers)."""
    admin_checks: list[tuple[int, int]] = field(default_factory=list)

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        if self.fail_text is not None:
            raise self.fail_text
        parts = [text[i : i + self.limit] for i in range(0, len(text), self.limit)] or [""]
        ids: list[int | None] = [None] * len(parts)
        dates: list[datetime | None] = [None] * len(parts)
        for index, part in enumerate(parts):
            self.bubbles += 1
            if self.bubbles in self.fail_bubbles:
                return Delivery(
                    message_ids=tuple(ids),
                    texts=tuple(parts),
                    dates=tuple(dates),
                    error=TelegramError("injected failure"),
                )
            self.next_id += 1
            self.sent.append(SentMessage(chat_id, self.next_id, part, thread_id, reply_to))
            ids[index] = self.next_id
            dates[index] = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
            if on_bubble is not None:
                await on_bubble(
                    Delivery(message_ids=tuple(ids), texts=tuple(parts), dates=tuple(dates))
                )
        return Delivery(message_ids=tuple(ids), texts=tuple(parts), dates=tuple(dates))

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        self.deleted.append((chat_id, message_id))

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        self.reactions.append((chat_id, message_id, emoji))

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        self.admin_checks.append((chat_id, user_id))
        return user_id in self.admins.get(chat_id, set())

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        if self.fail_photo is not None:
            raise self.fail_photo
        self.next_id += 1
        self.photos.append((chat_id, photo))
        self.captions.append(caption)
        return self.next_id

    def texts(self, chat_id: int) -> list[str]:
        return [m.text for m in self.sent if m.chat_id == chat_id]


@dataclass(slots=True)
class SteppingClock:
    """A clock that moves only when told to."""

    current: datetime = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


def claimed_days(store: InMemoryStore) -> set[date]:
    """The days `store` has handed out through `claim_daily_summary` (for assertions)."""
    return set(store._summaries)


ALICE = Sender(id=1001, name="Alice")
BOB = Sender(id=1002, name="Bob")
CHEN = Sender(id=1003, name="Chen")
OWNER = Sender(id=42, name="Owner")


def inbound(
    *,
    chat_id: int = -100500,
    message_id: int,
    text: str,
    sender: Sender = ALICE,
    at: datetime,
    chat_type: str = "supergroup",
    mentions_bot: bool = False,
    quote: Quote | None = None,
    command: str | None = None,
    update_id: int | None = None,
    language_code: str | None = None,
    direct_messages: bool = False,
) -> InboundMessage:
    return InboundMessage(
        update_id=update_id,
        chat_id=chat_id,
        chat_type=chat_type,  # type: ignore[arg-type]
        message_id=message_id,
        date=at,
        sender=sender,
        text=text,
        quote=quote,
        mentions_bot=mentions_bot,
        command=command,
        language_code=language_code,
        direct_messages=direct_messages,
    )
