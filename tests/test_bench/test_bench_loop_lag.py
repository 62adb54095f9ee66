"""`bench.bench_loop_lag`: the ticker sees the loop's delays and the callback clock the
longest callback, so a blocked loop cannot pass for a free one."""

from __future__ import annotations

import asyncio
import time

import pytest

from bench import bench_loop_lag
from bench.bench_loop_lag import LagResult, _CallbackClock, _ticker


async def test_a_callback_that_blocks_the_loop_is_the_longest_and_the_ticker_sees_it() -> None:
    stop = asyncio.Event()
    lags: list[float] = []
    with _CallbackClock() as clock:
        ticker = asyncio.create_task(_ticker(stop, lags))
        await asyncio.sleep(0.01)
        time.sleep(0.05)  # noqa: ASYNC251 (the point: it blocks the loop, no tick runs)
        await asyncio.sleep(0.01)
        stop.set()
        await ticker
    assert clock.wall >= 0.05
    assert clock.cpu < clock.wall  # sleeping is no CPU
    assert max(lags) >= 40
    assert asyncio.Handle._run is clock._original  # removed on exit


def test_the_target_is_on_the_longest_callback() -> None:
    result = LagResult(
        lags_ms=(0.5, 1.0, 30.0),
        longest_cpu_ms=3.0,
        longest_wall_ms=25.0,
        statements=10,
        seconds=1.0,
        checkpoint_ms=5.0,
        big_append_ms=7.0,
    )
    _, measured, ok = result.target()
    assert not ok
    assert "longest callback 25.0 ms (3.0 ms of CPU)" in measured
    assert "| 25.0 ms | 3.0 ms | 1.00 ms |" in result.markdown()


@pytest.mark.slow
def test_a_small_run_stores_every_message_and_times_the_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench_loop_lag, "CHATS", 3)
    monkeypatch.setattr(bench_loop_lag, "MESSAGES_PER_CHAT", 10)
    result = bench_loop_lag.run()
    assert result.statements == 3 * 10 * 3 + 2
    assert result.checkpoint_ms > 0
    assert result.big_append_ms > 0
    assert len(result.lags_ms) > 10
    assert result.longest_wall_ms >= result.longest_cpu_ms > 0
