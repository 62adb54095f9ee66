"""`bot.app.topology`: what a shared database's workers share, and what they keep."""

from __future__ import annotations

from bot.app.topology import SharedTopology
from bot.services.send_pacing import LocalSendPacer, PaceLimits
from storage.engine import create_engine_for
from storage.send_pacing import SqlSendPacer


async def test_pacing_off_keeps_each_workers_own_book_without_a_round_trip_per_send() -> None:
    engine = create_engine_for("sqlite://")  # the pacer only keeps it
    try:
        topology = SharedTopology(engine)
        off = PaceLimits(per_chat_per_second=0, per_group_per_minute=0, per_bot_per_second=0)
        assert isinstance(topology.send_pacer(off), LocalSendPacer)
        assert isinstance(topology.send_pacer(PaceLimits()), SqlSendPacer)
        one_budget = PaceLimits(
            per_chat_per_second=0, per_group_per_minute=20, per_bot_per_second=0
        )
        assert isinstance(topology.send_pacer(one_budget), SqlSendPacer)
    finally:
        await engine.dispose()
