"""`SqlSendPacer`: two workers' pacers (two engines on one PostgreSQL) hand out one group's
slots as one bot: spaced a second apart, never more than 20 in a minute, none refused."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from bot.services.send_pacing import PaceLimits
from storage.engine import create_engine_for
from storage.postgres.jobs import STATEMENT_LISTENERS
from storage.send_pacing import SqlSendPacer
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

GROUP = -100800
NOW = 1_800_000_000.0


async def test_two_workers_reserve_one_group_as_one_bot() -> None:
    url = await fresh_postgres()
    engines = [create_engine_for(url), create_engine_for(url)]
    try:
        clock = [NOW]
        a, b = (SqlSendPacer(e, PaceLimits(), now=lambda: clock[0]) for e in engines)
        waits = await asyncio.gather(*((a, b)[n % 2].reserve(GROUP, "message") for n in range(24)))
        slots = sorted(NOW + w for w in waits)
        assert len(set(slots)) == 24  # every one got its own slot
        assert all(later - earlier >= 1.0 - 1e-6 for earlier, later in itertools.pairwise(slots))
        assert max(sum(1 for s in slots if t <= s < t + 60) for t in slots) <= 20
        assert slots[20] - slots[0] >= 61 - 1e-6
        # reactions keep the spacing but not the group's minute
        reaction = await a.reserve(GROUP, "reaction")
        assert reaction == pytest.approx(slots[-1] + 1.0 - NOW)
        # a 429 on one worker pauses the chat for the other
        await a.pause(GROUP - 1, 30.0)
        assert not await b.may_show(GROUP - 1)
        assert await b.may_show(GROUP - 2)
        assert await b.reserve(GROUP - 1, "message") == pytest.approx(30.0)
        # the bot-wide budget is shared too
        bot = sorted(await asyncio.gather(*((a, b)[n % 2].bot_slot() for n in range(60))))
        assert bot[-1] == pytest.approx(59 / 30)
    finally:
        for engine in engines:
            await engine.dispose()


async def test_a_send_no_chat_budget_counts_costs_no_round_trip() -> None:
    """With no gap between a chat's sends, a private chat's send takes no slot of any
    shared budget: it asks PostgreSQL nothing and waits only for the 429s this worker was
    told; a group's message still takes the group's shared minute."""
    url = await fresh_postgres()
    engine = create_engine_for(url)
    sent: list[str] = []
    STATEMENT_LISTENERS.append(sent.append)
    try:
        clock = [NOW]
        pacer = SqlSendPacer(engine, PaceLimits(per_chat_per_second=0), now=lambda: clock[0])
        assert [await pacer.reserve(42, "message") for _ in range(3)] == [0.0, 0.0, 0.0]
        assert sent == []
        await pacer.pause(42, 5.0)
        assert await pacer.reserve(42, "message") == pytest.approx(5.0)
        assert await pacer.reserve(43, "message") == 0.0
        sent.clear()
        assert await pacer.reserve(GROUP, "message") == 0.0
        assert len(sent) == 1  # the group's minute is shared
    finally:
        STATEMENT_LISTENERS.remove(sent.append)
        await engine.dispose()
