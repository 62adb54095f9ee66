"""Outbound pacing: Telegram's send limits as slots handed out in order (one worker).

Telegram's Bot FAQ ("My bot is hitting limits, how do I avoid this?",
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this): in one
chat, avoid more than one message a second; a bot cannot send more than 20 messages a
minute to the same group; bulk sending is held to about 30 messages a second. The three
budgets here are those (`[telegram] per_chat_per_second`, `per_group_per_minute`,
`per_bot_per_second`; 0 turns one off).

A send asks for a slot and waits until it: nothing is refused or dropped, slots are handed
out in the order asked (a turn's posts, sent one after the other, keep their order), and a
member sees a short delay instead of a 429. What counts:

- a message (a text bubble, a photo): the chat's spacing (`1 / per_chat_per_second` after
  the chat's previous slot) and, in a group (negative chat id), the group's window: the
  slot is at least 61 s (a minute and a second of margin for the request's way there)
  after the slot `per_group_per_minute` messages back, so no minute holds more than that
  many;
- a reaction: the chat's spacing only (it is not a message in the group's history);
- the bot-wide budget: sends at least `1 / per_bot_per_second` apart (so no second holds
  more than that many; 33 ms at 30 a second), asked right before the request goes, so a
  chat waiting out its group minute holds no other chat back;
- a chat action or a draft: never waits and takes no slot; it goes unless the chat is
  paused by a 429 (typing that arrives late is useless, and a draft is superseded by the
  next one or by the reply).

A 429 answer pauses the chat for its `retry_after`: every later slot there starts after it.

Spacing rather than bursts: Telegram says it "may allow short bursts" but not how long;
even spacing is the one schedule that stays under every window.

`PacingBook` is the pure bookkeeping (every input is a parameter, `now` included);
`LocalSendPacer` is it behind the `bot.ports.SendPacer` port with a clock.
`storage.send_pacing.SqlSendPacer` keeps the same books in PostgreSQL for several workers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.ports import PaceKind

GROUP_WINDOW_SECONDS = 61.0
"""The group budget's window: Telegram's minute and one second more, because a request
reaches Telegram a little after its slot (a late one must not land inside the minute of the
message `per_group_per_minute` before it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PaceLimits:
    """The three budgets; 0 turns one off."""

    per_chat_per_second: float = 1.0
    per_group_per_minute: int = 20
    per_bot_per_second: int = 30
    chat_gap: float = field(init=False, repr=False, compare=False)
    """Seconds between two slots in one chat."""
    bot_interval: float = field(init=False, repr=False, compare=False)
    """Seconds between two slots of the bot-wide budget (both worked out once, when the
    limits are made: every send reads them)."""

    def __post_init__(self) -> None:
        chat, bot = self.per_chat_per_second, self.per_bot_per_second
        object.__setattr__(self, "chat_gap", 1.0 / chat if chat > 0 else 0.0)
        object.__setattr__(self, "bot_interval", 1.0 / bot if bot > 0 else 0.0)

    def windowed(self, chat_id: int, kind: PaceKind) -> bool:
        """Whether the send counts against a group's per-minute budget."""
        return kind == "message" and chat_id < 0 and self.per_group_per_minute > 0

    @property
    def off(self) -> bool:
        """Whether no budget is counted (every limit 0): only a 429's pause holds a send."""
        return (
            self.per_chat_per_second <= 0
            and self.per_group_per_minute <= 0
            and self.per_bot_per_second <= 0
        )


def next_slot(
    limits: PaceLimits,
    *,
    chat_id: int,
    kind: PaceKind,
    now: float,
    last: float | None,
    recent: tuple[float, ...],
    paused_until: float,
) -> float:
    """The chat's next slot: after `now`, the pause, the previous slot plus the gap, and (a
    group's message) 61 s after the slot `per_group_per_minute` messages back in `recent`
    (the group's message slots, oldest first): a minute and the margin."""
    slot = max(now, paused_until)
    if last is not None:
        slot = max(slot, last + limits.chat_gap)
    limit = limits.per_group_per_minute
    if limits.windowed(chat_id, kind) and len(recent) >= limit:
        slot = max(slot, recent[-limit] + GROUP_WINDOW_SECONDS)
    return slot


@dataclass(slots=True)
class _ChatBook:
    last: float | None = None
    recent: deque[float] = field(default_factory=deque)
    paused_until: float = 0.0


@dataclass(slots=True)
class PacingBook:
    """Every chat's slots, the bot's last slot and the pauses, in memory."""

    limits: PaceLimits
    _chats: dict[int, _ChatBook] = field(default_factory=dict)
    _bot_last: float | None = None
    _calls: int = 0

    SWEEP_EVERY = 1024
    """Every this many reservations, chats idle for over a minute are forgotten."""

    def reserve(self, chat_id: int, kind: PaceKind, now: float) -> float:
        """Take the chat's next slot (an absolute time, ≥ `now`)."""
        self._calls += 1
        if self._calls % self.SWEEP_EVERY == 0:
            self.sweep(now)
        book = self._chats.setdefault(chat_id, _ChatBook())
        slot = next_slot(
            self.limits,
            chat_id=chat_id,
            kind=kind,
            now=now,
            last=book.last,
            recent=tuple(book.recent),
            paused_until=book.paused_until,
        )
        book.last = slot
        if self.limits.windowed(chat_id, kind):
            book.recent.append(slot)
            while len(book.recent) > self.limits.per_group_per_minute:
                book.recent.popleft()
        return slot

    def bot_slot(self, now: float) -> float:
        """Take a slot of the bot-wide budget (an absolute time, ≥ `now`)."""
        interval = self.limits.bot_interval
        if interval <= 0:
            return now
        slot = now if self._bot_last is None else max(now, self._bot_last + interval)
        self._bot_last = slot
        return slot

    def pause(self, chat_id: int, until: float) -> None:
        book = self._chats.setdefault(chat_id, _ChatBook())
        book.paused_until = max(book.paused_until, until)

    def paused(self, chat_id: int, now: float) -> bool:
        book = self._chats.get(chat_id)
        return book is not None and book.paused_until > now

    def sweep(self, now: float) -> None:
        """Forget chats whose last slot and pause are over a minute old."""
        stale = [
            chat_id
            for chat_id, book in self._chats.items()
            if (book.last is None or now - book.last > GROUP_WINDOW_SECONDS)
            and book.paused_until <= now
        ]
        for chat_id in stale:
            del self._chats[chat_id]

    @property
    def tracked(self) -> int:
        """How many chats are remembered (for tests)."""
        return len(self._chats)


class LocalSendPacer:
    """Implements `bot.ports.SendPacer` with this process's `PacingBook`."""

    def __init__(self, limits: PaceLimits, now: Callable[[], float] = time.monotonic) -> None:
        self.book = PacingBook(limits)
        self._now = now

    async def reserve(self, chat_id: int, kind: PaceKind) -> float:
        now = self._now()
        return self.book.reserve(chat_id, kind, now) - now

    async def bot_slot(self) -> float:
        now = self._now()
        return self.book.bot_slot(now) - now

    async def may_show(self, chat_id: int) -> bool:
        return not self.book.paused(chat_id, self._now())

    async def pause(self, chat_id: int, seconds: float) -> None:
        self.book.pause(chat_id, self._now() + seconds)
