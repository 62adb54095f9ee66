"""The spend counters' contract (`bot.agent.spend.SpendCounters`), the same on every
backend: in memory, SQLite and PostgreSQL (`storage.spend`). A hold is all or none and
only below every limit; settling releases the hold and counts the spend; a restart (a new
engine on the same database) keeps it; a notice is claimed once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.spend_counters import (
    Amount,
    Change,
    Counter,
    Limit,
    LocalSpendCounters,
    SpendCounters,
)
from storage.engine import create_engine_for
from storage.spend import SqlSpendCounters
from tests.test_storage.conftest import BACKENDS, SQL_BACKENDS, database_url

DAY = "2026-12-04"
MEMBER = Counter("member", DAY, -100, 7)
CHAT = Counter("chat", DAY, -100)
BOT_DAY = Counter("day", DAY)
MONTH = Counter("month", DAY[:7])
CALL = Amount(10_000_000, 1_000)


class Opened:
    """Counters over one database; `again()` opens them anew, as a restarted process."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.engines: list[object] = []
        self.local = LocalSpendCounters()

    def again(self) -> SpendCounters:
        if self.url is None:
            return self.local
        engine = create_engine_for(self.url)
        self.engines.append(engine)
        return SqlSpendCounters(engine)

    async def close(self) -> None:
        for engine in self.engines:
            await engine.dispose()  # type: ignore[attr-defined]


@pytest.fixture(params=BACKENDS)
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    url = None if request.param == "memory" else await database_url(request.param, tmp_path)
    opened = Opened(url)
    try:
        yield opened
    finally:
        await opened.close()


def held(counter: Counter, limit: Limit, amount: Amount = CALL) -> Change:
    return Change(counter, held=amount, limit=limit)


def settled(counter: Counter, spent: Amount = CALL, release: Amount = CALL) -> Change:
    return Change(counter, spent=spent, held=-release)


async def test_a_budget_admits_calls_until_it_is_reached_then_refuses(opened: Opened) -> None:
    counters = opened.again()
    limit = Limit(cost=30_000_000)
    for _ in range(3):
        assert await counters.hold([held(MEMBER, limit)]) is None
        totals = await counters.settle([settled(MEMBER)])
        assert totals[MEMBER].cost <= 30_000_000
    assert await counters.hold([held(MEMBER, limit)]) == MEMBER
    assert (await counters.totals([MEMBER, CHAT])) == {
        MEMBER: Amount(30_000_000, 3_000),
        CHAT: Amount(),
    }


async def test_calls_in_flight_count_against_the_limit(opened: Opened) -> None:
    counters = opened.again()
    limit = Limit(tokens=2_000)
    assert await counters.hold([held(BOT_DAY, limit)]) is None
    assert await counters.hold([held(BOT_DAY, limit)]) is None
    # two calls in flight hold 2,000: the limit is reached before anything is spent
    assert await counters.hold([held(BOT_DAY, limit)]) == BOT_DAY
    await counters.settle([settled(BOT_DAY, spent=Amount(0, 100))])
    assert await counters.hold([held(BOT_DAY, limit)]) is None


async def test_a_hold_is_all_or_none(opened: Opened) -> None:
    counters = opened.again()
    await counters.settle([Change(CHAT, spent=Amount(0, 5_000))])
    wide, spent = Limit(tokens=100_000), Limit(tokens=5_000)
    over = await counters.hold(
        [held(MEMBER, wide), held(CHAT, spent), held(BOT_DAY, wide), held(MONTH, wide)]
    )
    assert over == CHAT
    # nothing was held on the member's, the day's or the month's budget
    assert await counters.hold([held(MEMBER, Limit(tokens=1_000))]) is None
    assert await counters.hold([held(BOT_DAY, Limit(tokens=1_000))]) is None
    assert await counters.hold([held(MONTH, Limit(tokens=1_000))]) is None


async def test_top_lists_the_largest_spenders_of_a_period(opened: Opened) -> None:
    counters = opened.again()
    for chat, cost in ((-1, 5), (-2, 30), (-3, 10)):
        await counters.settle([Change(Counter("chat", DAY, chat), spent=Amount(cost, 1))])
    await counters.settle([Change(Counter("chat", "2026-12-03", -4), spent=Amount(99, 1))])
    top = await counters.top("chat", DAY, 2)
    assert [(c.chat_id, a.cost) for c, a in top] == [(-2, 30), (-3, 10)]


async def test_a_notice_is_claimed_once(opened: Opened) -> None:
    counters = opened.again()
    assert await counters.claim_notice("refused", MEMBER)
    assert not await counters.claim_notice("refused", MEMBER)
    assert await counters.claim_notice("refused", CHAT)
    assert await counters.claim_notice("owner_80", MEMBER)
    assert not await opened.again().claim_notice("refused", MEMBER)


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_a_restart_keeps_the_spend(backend: str, tmp_path: Path) -> None:
    opened = Opened(await database_url(backend, tmp_path))
    try:
        first = opened.again()
        assert await first.hold([held(MONTH, Limit(cost=20_000_000))]) is None
        await first.settle([settled(MONTH)])
        await first.settle([Change(MONTH, spent=CALL)])
        again = opened.again()
        assert (await again.totals([MONTH]))[MONTH] == Amount(20_000_000, 2_000)
        assert await again.hold([held(MONTH, Limit(cost=20_000_000))]) == MONTH
    finally:
        await opened.close()


async def test_concurrent_checks_pass_a_limit_by_one_call_at_most(opened: Opened) -> None:
    """Many checks at once (on PostgreSQL through two engines, as two workers have; SQLite
    has one worker): each that is admitted holds a call's bound; together they pass the
    limit by at most that one call."""
    first = opened.again()
    shared = opened.url is not None and opened.url.startswith("postgresql")
    workers = [first, opened.again() if shared else first]
    limit = Limit(cost=55_000_000)

    async def one(n: int) -> bool:
        counters = workers[n % 2]
        if await counters.hold([held(MEMBER, limit), held(BOT_DAY, limit)]) is not None:
            return False
        await counters.settle([settled(MEMBER), settled(BOT_DAY)])
        return True

    admitted = sum(await asyncio.gather(*(one(n) for n in range(20))))
    spent = (await workers[0].totals([BOT_DAY]))[BOT_DAY]
    assert admitted == 6  # 5.5 calls: the sixth crosses, none after it
    assert spent.cost == admitted * CALL.cost


async def test_periods_before_a_month_are_forgotten(opened: Opened) -> None:
    counters = opened.again()
    old_day, old_month = Counter("day", "2026-10-31"), Counter("month", "2026-10")
    kept = (Counter("day", "2026-11-01"), Counter("month", "2026-11"), BOT_DAY, MONTH)
    await counters.settle([Change(c, spent=CALL) for c in (old_day, old_month, *kept)])
    assert await counters.claim_notice("refused", old_day)
    await counters.forget_before("2026-11")
    totals = await counters.totals([old_day, old_month, *kept])
    assert [totals[c] for c in (old_day, old_month)] == [Amount(), Amount()]
    assert all(totals[c] == CALL for c in kept)
    assert await counters.claim_notice("refused", old_day)  # its notice went with it
