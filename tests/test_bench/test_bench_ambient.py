"""The ambient replay (bench/bench_ambient.py) on a short day: only settled bursts past the
cooldown and the daily maximum reach the judge, each under its input cap."""

from __future__ import annotations

from bench.bench_ambient import busy_day, replay


async def test_the_gates_keep_most_messages_from_the_judge() -> None:
    result = await replay(busy_day(300))
    decided = result["decided_by"]
    assert sum(decided.values()) == 300
    assert result["judge_calls"] == decided.get("judge:reply", 0) + decided.get("judge:skip", 0)
    assert 0 < result["judge_calls"] < 300 // 3
    assert result["replies"] <= 10  # the daily maximum
    assert 0 < result["input_per_judged_max"] <= 1_200  # the judge's cap
    assert result["cost"] > 0
