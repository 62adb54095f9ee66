"""Outbound pacing in PostgreSQL, shared by every worker (implements `bot.ports.SendPacer`).

The budgets and their rules are `bot.services.send_pacing`'s (Telegram's Bot FAQ limits);
here the books live in one table, `send_pacing(chat_id, last_at, recent, paused_until)`, so
two webhook workers answering in one group together stay under its 20 messages a minute.

One row per chat: `last_at` is the chat's newest slot, `recent` the group's newest message
slots (at most `per_group_per_minute`, space-separated, oldest first), `paused_until` the end
of a 429's `retry_after`. Row 0 (no Telegram chat has id 0) holds the bot-wide last slot.

One statement per reservation (`_RESERVE`), run as its own transaction in one round trip
(`storage.postgres.jobs.FastPostgres.statement`): an `INSERT … ON CONFLICT DO UPDATE` whose SET
computes the new slot from the row it has locked, so two workers asking at once queue one
behind the other and see each other's slots (a CTE reading the row first would read the
statement's snapshot, not the row a concurrent worker just committed). The bot-wide slot is
one more such statement on row 0, asked right before the request goes. Times are wall-clock
seconds (`time.time()`): the workers share it, not a monotonic clock.

A send that takes no slot of a chat budget (with `per_chat_per_second = 0`, any send but a
group's message) costs no round trip: like every send with pacing off, it waits only for the
429 pauses this worker was told itself.

Why a list in one column, not a row per message: the group window needs the slot 20
messages back, and only a value in the locked row is read fresh by the upsert. Text, not an
array type, so the one schema also creates on SQLite (where the table stays empty).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.ports import PaceKind
from bot.services.send_pacing import GROUP_WINDOW_SECONDS, PaceLimits, PacingBook
from storage.postgres.jobs import FastPostgres

BOT_ROW = 0
"""The row of the bot-wide budget."""

_RECENT = "string_to_array(p.recent, ' ')::float8[]"
_SLOT = f"""greatest(
    :now,
    p.paused_until,
    p.last_at + :gap,
    CASE WHEN :windowed AND cardinality({_RECENT}) >= :window_limit
         THEN ({_RECENT})[cardinality({_RECENT}) - :window_limit + 1] + :window_seconds
         ELSE :now END
)"""

_RESERVE = sa.text(
    f"""
    INSERT INTO send_pacing AS p (chat_id, last_at, recent, paused_until)
    VALUES (:chat_id, :now, CASE WHEN :windowed THEN CAST(:now AS TEXT) ELSE '' END, 0)
    ON CONFLICT (chat_id) DO UPDATE SET
        last_at = {_SLOT},
        recent = CASE WHEN :windowed THEN array_to_string(
            ({_RECENT} || {_SLOT})[greatest(cardinality({_RECENT}) + 2 - :window_limit, 1):],
            ' ') ELSE p.recent END
    RETURNING p.last_at
    """
).bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger),
    sa.bindparam("now", type_=sa.Float),
    sa.bindparam("gap", type_=sa.Float),
    sa.bindparam("windowed", type_=sa.Boolean),
    sa.bindparam("window_limit", type_=sa.Integer),
    sa.bindparam("window_seconds", type_=sa.Float),
)

_BOT_SLOT = sa.text(
    f"""
    INSERT INTO send_pacing AS p (chat_id, last_at, recent, paused_until)
    VALUES ({BOT_ROW}, :now, '', 0)
    ON CONFLICT (chat_id) DO UPDATE SET last_at = greatest(:now, p.last_at + :interval)
    RETURNING p.last_at
    """
).bindparams(sa.bindparam("now", type_=sa.Float), sa.bindparam("interval", type_=sa.Float))

_PAUSE = sa.text(
    """
    INSERT INTO send_pacing AS p (chat_id, last_at, recent, paused_until)
    VALUES (:chat_id, 0, '', :until)
    ON CONFLICT (chat_id) DO UPDATE SET paused_until = greatest(p.paused_until, :until)
    """
).bindparams(sa.bindparam("chat_id", type_=sa.BigInteger), sa.bindparam("until", type_=sa.Float))

_PAUSED_UNTIL = sa.text("SELECT paused_until FROM send_pacing WHERE chat_id = :chat_id").bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger)
)

_SWEEP = sa.text(
    f"""
    DELETE FROM send_pacing
    WHERE chat_id <> {BOT_ROW} AND last_at < :before AND paused_until < :now
    """
).bindparams(sa.bindparam("before", type_=sa.Float), sa.bindparam("now", type_=sa.Float))


class SqlSendPacer:
    """Implements `bot.ports.SendPacer` on PostgreSQL (see the module docstring)."""

    SWEEP_EVERY = 1024
    """Every this many reservations, rows idle for two minutes are deleted."""

    def __init__(
        self, engine: AsyncEngine, limits: PaceLimits, *, now: Callable[[], float] = time.time
    ) -> None:
        self._jobs = FastPostgres(engine)
        self.limits = limits
        self._now = now
        self._calls = 0
        self._heard = PacingBook(limits)
        """The pauses this worker was told itself: all a send that counts against no
        chat budget waits for (a round trip would count nothing for it)."""

    async def reserve(self, chat_id: int, kind: PaceKind) -> float:
        now = self._now()
        if self.limits.chat_gap <= 0 and not self.limits.windowed(chat_id, kind):
            return self._heard.reserve(chat_id, kind, now) - now
        self._calls += 1
        if self._calls % self.SWEEP_EVERY == 0:
            await self._jobs.statement(
                _SWEEP, {"before": now - 2 * GROUP_WINDOW_SECONDS, "now": now}
            )
        (row,) = await self._jobs.statement(
            _RESERVE,
            {
                "chat_id": chat_id,
                "now": now,
                "gap": self.limits.chat_gap,
                "windowed": self.limits.windowed(chat_id, kind),
                "window_limit": max(self.limits.per_group_per_minute, 1),
                "window_seconds": GROUP_WINDOW_SECONDS,
            },
        )
        return max(0.0, float(row[0]) - now)

    async def bot_slot(self) -> float:
        interval = self.limits.bot_interval
        if interval <= 0:
            return 0.0
        now = self._now()
        (row,) = await self._jobs.statement(_BOT_SLOT, {"now": now, "interval": interval})
        return max(0.0, float(row[0]) - now)

    async def may_show(self, chat_id: int) -> bool:
        rows = await self._jobs.statement(_PAUSED_UNTIL, {"chat_id": chat_id})
        until = rows[0][0] if rows else None
        return until is None or float(until) <= self._now()

    async def pause(self, chat_id: int, seconds: float) -> None:
        until = self._now() + seconds
        self._heard.pause(chat_id, until)
        await self._jobs.statement(_PAUSE, {"chat_id": chat_id, "until": until})
