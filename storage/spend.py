"""Spend counters in the database (implements `bot.agent.spend_counters.SpendCounters`).

`spend_counters(scope, period, chat_id, user_id, cost, tokens, held_cost, held_tokens)`: one
row per budget and period (money in billionths), what it spent and what calls in flight hold
on it; `spend_notices` the notices given once per budget and period.

PostgreSQL (several workers): a check is one statement (`_hold_statement`). Each limited
counter's row is upserted in turn, in the fixed order member → chat → day → month, and only
when the one before it was: `INSERT … ON CONFLICT DO UPDATE … WHERE spent + held < limit`
locks the row and tests the newest committed values, so two workers checking at once see
each other's holds, and a limit is passed by at most one call. When a later counter refuses,
the holds taken before it are given back with one more statement (the refusal path only).
The fixed order means two checks lock rows in the same order and never deadlock.

SQLite (one worker): the same table, checked under this process's lock in one transaction;
holds are cleared when the process first checks (a hold outlives only its own process).
Settling a call is one multi-row upsert on both.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.agent.spend_counters import SCOPES, ZERO, Amount, Change, Counter, Scope
from bot.errors import StorageUnavailable
from storage.engine import WRITE
from storage.executor import parts_for

_KEY = "scope, period, chat_id, user_id"
_COLUMNS = f"{_KEY}, cost, tokens, held_cost, held_tokens"

_NOTICE = sa.text(
    "INSERT INTO spend_notices (kind, scope, period, chat_id, user_id) "
    "VALUES (:kind, :scope, :period, :chat_id, :user_id) ON CONFLICT DO NOTHING RETURNING 1"
).bindparams(
    sa.bindparam("chat_id", type_=sa.BigInteger), sa.bindparam("user_id", type_=sa.BigInteger)
)

_TOP = sa.text(
    "SELECT scope, period, chat_id, user_id, cost, tokens FROM spend_counters "
    "WHERE scope = :scope AND period = :period AND (cost > 0 OR tokens > 0) "
    "ORDER BY cost DESC, tokens DESC, chat_id, user_id LIMIT :count"
)

_FORGET = (
    sa.text("DELETE FROM spend_counters WHERE period < :month"),
    sa.text("DELETE FROM spend_notices WHERE period < :month"),
)

_CLEAR_HOLDS = sa.text(
    "UPDATE spend_counters SET held_cost = 0, held_tokens = 0 "
    "WHERE held_cost <> 0 OR held_tokens <> 0"
)


def _ordered(changes: Sequence[Change]) -> list[Change]:
    return sorted(changes, key=lambda c: (SCOPES.index(c.counter.scope), c.counter.user_id))


def _key_params(i: int, counter: Counter) -> dict[str, object]:
    return {
        f"s{i}": counter.scope,
        f"p{i}": counter.period,
        f"c{i}": counter.chat_id,
        f"u{i}": counter.user_id,
    }


def _hold_statement(count: int) -> sa.TextClause:
    """PostgreSQL: hold on `count` counters, each only when the one before it took."""
    parts = []
    for i in range(count):
        guard = "" if i == 0 else f" WHERE EXISTS (SELECT 1 FROM took{i - 1})"
        parts.append(
            f"""took{i} AS (
            INSERT INTO spend_counters AS c ({_COLUMNS})
            SELECT :s{i}, :p{i}, :c{i}, :u{i}, 0, 0, :hc{i}, :ht{i}{guard}
            ON CONFLICT ({_KEY}) DO UPDATE
            SET held_cost = c.held_cost + excluded.held_cost,
                held_tokens = c.held_tokens + excluded.held_tokens
            WHERE (:lc{i} = 0 OR c.cost + c.held_cost < :lc{i})
              AND (:lt{i} = 0 OR c.tokens + c.held_tokens < :lt{i})
            RETURNING 1
        )"""
        )
    took = ", ".join(f"EXISTS (SELECT 1 FROM took{i})" for i in range(count))
    statement = sa.text("WITH " + ",\n".join(parts) + f"\nSELECT {took}")
    return statement.bindparams(
        *(
            sa.bindparam(f"{name}{i}", type_=sa.BigInteger)
            for i in range(count)
            for name in ("c", "u", "hc", "ht", "lc", "lt")
        )
    )


def _settle_statement(count: int, greatest: str) -> sa.TextClause:
    rows = ", ".join(
        f"(:s{i}, :p{i}, :c{i}, :u{i}, :sc{i}, :st{i}, :hc{i}, :ht{i})" for i in range(count)
    )
    statement = sa.text(
        f"INSERT INTO spend_counters ({_COLUMNS}) VALUES {rows} "
        f"ON CONFLICT ({_KEY}) DO UPDATE SET "
        "cost = spend_counters.cost + excluded.cost, "
        "tokens = spend_counters.tokens + excluded.tokens, "
        f"held_cost = {greatest}(0, spend_counters.held_cost + excluded.held_cost), "
        f"held_tokens = {greatest}(0, spend_counters.held_tokens + excluded.held_tokens) "
        "RETURNING scope, period, chat_id, user_id, cost, tokens"
    )
    return statement.bindparams(
        *(
            sa.bindparam(f"{name}{i}", type_=sa.BigInteger)
            for i in range(count)
            for name in ("c", "u", "sc", "st", "hc", "ht")
        )
    )


def _select_statement(count: int) -> sa.TextClause:
    match = " OR ".join(
        f"(scope = :s{i} AND period = :p{i} AND chat_id = :c{i} AND user_id = :u{i})"
        for i in range(count)
    )
    statement = sa.text(
        f"SELECT scope, period, chat_id, user_id, cost, tokens, held_cost, held_tokens "
        f"FROM spend_counters WHERE {match}"
    )
    return statement.bindparams(
        *(sa.bindparam(f"{name}{i}", type_=sa.BigInteger) for i in range(count) for name in "cu")
    )


def _counter(row: sa.Row[tuple[object, ...]]) -> Counter:
    scope: Scope = row.scope
    return Counter(scope, str(row.period), int(row.chat_id), int(row.user_id))


class SqlSpendCounters:
    """Implements `bot.agent.spend_counters.SpendCounters` on SQLite and PostgreSQL (see above)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        parts = parts_for(engine)
        self._shared = parts.concurrent_writers
        """PostgreSQL's checks run at once across workers; SQLite's one at a time."""
        self._greatest = parts.greatest
        self._lock = asyncio.Lock()  # SQLite: one check at a time in this process
        self._holds_cleared = self._shared

    async def hold(self, changes: Sequence[Change]) -> Counter | None:
        ordered = _ordered(changes)
        if not ordered:
            return None
        if self._shared:
            return await self._hold_shared(ordered)
        async with self._serial(), self._write() as conn:
            if not self._holds_cleared:  # holds of a process that ended are void
                await conn.execute(_CLEAR_HOLDS)
                self._holds_cleared = True
            used = await self._used(conn, [c.counter for c in ordered])
            for change in ordered:
                if change.limit.reached(used.get(change.counter, ZERO)):
                    return change.counter
            await self._apply(conn, ordered)
            return None

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (SQLite: `BEGIN IMMEDIATE`, so it queues on the busy timeout
        behind the store's writers); a database error is `StorageUnavailable`."""
        try:
            async with self._engine.connect() as conn:
                await conn.execution_options(**WRITE)
                async with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"spend counters: {exc}") from exc

    def _serial(self) -> contextlib.AbstractAsyncContextManager[object]:
        """SQLite: this process's writes one at a time (a read that turns into a write
        beside another writer is refused as busy, not queued); PostgreSQL: no lock."""
        return contextlib.nullcontext() if self._shared else self._lock

    async def _hold_shared(self, ordered: list[Change]) -> Counter | None:
        params: dict[str, object] = {}
        for i, change in enumerate(ordered):
            params |= _key_params(i, change.counter)
            params |= {
                f"hc{i}": change.held.cost,
                f"ht{i}": change.held.tokens,
                f"lc{i}": change.limit.cost,
                f"lt{i}": change.limit.tokens,
            }
        async with self._write() as conn:
            took = (await conn.execute(_hold_statement(len(ordered)), params)).one()
        taken = sum(1 for t in took if t)
        if taken == len(ordered):
            return None
        if taken:  # give back what the counters before the refusing one took
            await self.settle([Change(c.counter, held=-c.held) for c in ordered[:taken]])
        return ordered[taken].counter

    async def settle(self, changes: Sequence[Change]) -> dict[Counter, Amount]:
        ordered = _ordered(changes)
        if not ordered:
            return {}
        async with self._serial(), self._write() as conn:
            return await self._apply(conn, ordered)

    async def _apply(self, conn: AsyncConnection, ordered: list[Change]) -> dict[Counter, Amount]:
        params: dict[str, object] = {}
        for i, change in enumerate(ordered):
            params |= _key_params(i, change.counter)
            params |= {
                f"sc{i}": change.spent.cost,
                f"st{i}": change.spent.tokens,
                f"hc{i}": change.held.cost,
                f"ht{i}": change.held.tokens,
            }
        rows = (await conn.execute(_settle_statement(len(ordered), self._greatest), params)).all()
        return {_counter(row): Amount(int(row.cost), int(row.tokens)) for row in rows}

    async def _used(
        self, conn: AsyncConnection, counters: Sequence[Counter]
    ) -> dict[Counter, Amount]:
        params: dict[str, object] = {}
        for i, counter in enumerate(counters):
            params |= _key_params(i, counter)
        rows = (await conn.execute(_select_statement(len(counters)), params)).all()
        return {
            _counter(row): Amount(
                int(row.cost) + int(row.held_cost), int(row.tokens) + int(row.held_tokens)
            )
            for row in rows
        }

    async def totals(self, counters: Sequence[Counter]) -> dict[Counter, Amount]:
        if not counters:
            return {}
        params: dict[str, object] = {}
        for i, counter in enumerate(counters):
            params |= _key_params(i, counter)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(_select_statement(len(counters)), params)).all()
        found = {_counter(row): Amount(int(row.cost), int(row.tokens)) for row in rows}
        return {c: found.get(c, ZERO) for c in counters}

    async def top(self, scope: Scope, period: str, count: int) -> list[tuple[Counter, Amount]]:
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(_TOP, {"scope": scope, "period": period, "count": count})
            ).all()
        return [(_counter(row), Amount(int(row.cost), int(row.tokens))) for row in rows]

    async def forget_before(self, month: str) -> None:
        # `YYYY-MM-DD` and `YYYY-MM` both sort before `month` exactly when older than it
        async with self._serial(), self._write() as conn:
            for statement in _FORGET:
                await conn.execute(statement, {"month": month})

    async def claim_notice(self, kind: str, counter: Counter) -> bool:
        async with self._serial(), self._write() as conn:
            result = await conn.execute(
                _NOTICE,
                {
                    "kind": kind,
                    "scope": counter.scope,
                    "period": counter.period,
                    "chat_id": counter.chat_id,
                    "user_id": counter.user_id,
                },
            )
            return result.first() is not None
