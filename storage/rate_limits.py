"""Rate-limit buckets in PostgreSQL, shared by every worker (implements `bot.ports.RateLimits`).

With several webhook workers behind a load balancer, per-process counts would give a member
N times the limit; here each check is one statement on the shared table
`rate_limit_buckets(scope, key, minute, count)`, one row per user or chat per wall-clock
minute.

Why an approximate sliding minute, not a fixed one: fixed minute buckets let twice the limit
through around a minute boundary (a burst at :59 and another at :00). The estimate of the
last 60 s is `previous minute's count × the part of it still inside the last 60 s + this
minute's count`, the way a sliding log would count an evenly spread previous minute; it
keeps two rows per key and needs no per-message log. Why not a row per message: a flood
would write a row per message and need a COUNT over them on every check.

One statement per check (`_TAKE`): the member's bucket is incremented only when its
estimate is under the limit, and the chat's only when the member's was and the chat's is
under its own; the conditional `INSERT … ON CONFLICT DO UPDATE … WHERE` locks the row, so
two workers checking at once see each other's counts. A message the chat's limit refuses
still counts against its member (the statement cannot undo the first increment): the
member's own budget only gets tighter, never wider. Rows older than the previous minute are
deleted every `SWEEP_EVERY` checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

UNLIMITED = 2**31 - 1
"""A limit of 0 means unlimited; the statement compares against this instead."""

_TAKE = sa.text(
    """
    WITH
    prev_user AS (
        SELECT coalesce(max(count), 0) * :carry AS n FROM rate_limit_buckets
        WHERE scope = 'user' AND key = :user_id AND minute = :minute - 1
    ),
    prev_chat AS (
        SELECT coalesce(max(count), 0) * :carry AS n FROM rate_limit_buckets
        WHERE scope = 'chat' AND key = :chat_id AND minute = :minute - 1
    ),
    took_user AS (
        INSERT INTO rate_limit_buckets AS b (scope, key, minute, count)
        SELECT 'user', :user_id, :minute, 1 FROM prev_user WHERE prev_user.n < :per_user
        ON CONFLICT (scope, key, minute) DO UPDATE SET count = b.count + 1
        WHERE b.count + (SELECT n FROM prev_user) < :per_user
        RETURNING 1
    ),
    took_chat AS (
        INSERT INTO rate_limit_buckets AS b (scope, key, minute, count)
        SELECT 'chat', :chat_id, :minute, 1 FROM prev_chat
        WHERE prev_chat.n < :per_chat AND EXISTS (SELECT 1 FROM took_user)
        ON CONFLICT (scope, key, minute) DO UPDATE SET count = b.count + 1
        WHERE b.count + (SELECT n FROM prev_chat) < :per_chat
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM took_chat)
    """
).bindparams(
    sa.bindparam("user_id", type_=sa.BigInteger),
    sa.bindparam("chat_id", type_=sa.BigInteger),
    sa.bindparam("minute", type_=sa.BigInteger),
    sa.bindparam("carry", type_=sa.Float),
    sa.bindparam("per_user", type_=sa.Integer),
    sa.bindparam("per_chat", type_=sa.Integer),
)

_WARN = sa.text(
    """
    INSERT INTO rate_limit_buckets (scope, key, minute, count)
    VALUES ('warned', :chat_id, :minute, 1)
    ON CONFLICT (scope, key, minute) DO NOTHING
    RETURNING 1
    """
).bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger), sa.bindparam("minute", type_=sa.BigInteger)
)

_SWEEP = sa.text("DELETE FROM rate_limit_buckets WHERE minute < :minute - 1").bindparams(
    sa.bindparam("minute", type_=sa.BigInteger)
)


class SqlRateLimits:
    """Implements `bot.ports.RateLimits` on PostgreSQL (see the module docstring)."""

    SWEEP_EVERY = 1024

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        per_user: int,
        per_chat: int,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self.per_user = per_user
        self.per_chat = per_chat
        self._now = now  # wall-clock seconds: the workers share it, not a monotonic clock
        self._calls = 0

    async def take(self, *, user_id: int, chat_id: int) -> bool:
        if self.per_user <= 0 and self.per_chat <= 0:
            return True
        now = self._now()
        minute = int(now // 60)
        carry = 1.0 - (now - minute * 60) / 60  # the part of the previous minute still in
        async with self._engine.begin() as conn:
            self._calls += 1
            if self._calls % self.SWEEP_EVERY == 0:
                await conn.execute(_SWEEP, {"minute": minute})
            result = await conn.execute(
                _TAKE,
                {
                    "user_id": user_id,
                    "chat_id": chat_id,
                    "minute": minute,
                    "carry": carry,
                    "per_user": self.per_user if self.per_user > 0 else UNLIMITED,
                    "per_chat": self.per_chat if self.per_chat > 0 else UNLIMITED,
                },
            )
            return bool(result.scalar_one())

    async def warn_once(self, chat_id: int) -> bool:
        """Once per chat per wall-clock minute, across workers."""
        async with self._engine.begin() as conn:
            result = await conn.execute(
                _WARN, {"chat_id": chat_id, "minute": int(self._now() // 60)}
            )
            return result.first() is not None
