"""bench/group_window on a tiny short-message group: it runs, and the runtime's prefix
breaks only when the window moves, summaries included."""

from __future__ import annotations

from bench.group_window import POLICIES, markdown, measure
from bench.workload import generate


async def test_a_small_group_keeps_prefix_breaks_to_window_moves() -> None:
    workload = generate(240, 43, addressed_share=0.1, tool_share=0.0, quote_share=0.05)
    policy = "answered turns + compaction, cap 100"
    assert policy in POLICIES
    row = await measure("short-message group", workload, policy)
    assert row.window_moves > 0
    assert row.prefix_breaks <= row.window_moves
    assert row.compaction_calls > 0
    assert row.visible_p50 > 38  # the 36-message turn-cap window of before
    assert "| short-message group |" in markdown([row])
