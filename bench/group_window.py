"""Group window and compaction: before/after on two group workloads.

`python -m bench.group_window [--messages N] [--seed S]`

Drives the real runtime (`economy.run_ours`: `build_app` over the in-memory store, the
scripted model with its simulated prefix cache) on
- the ADR workload (`workload.generate`: per-turn context, 40 % of messages address the
  bot, tool turns), and
- a short-message group (the same generator, 4 % addressed, few tools and quotes: a busy
  group where most messages are never answered),
under several window policies: `before` (every turn counts against the turn cap, no
compaction: the behaviour before answered turns), then the new defaults and candidate
group message caps. Per policy: conversation messages visible per reply call, history tokens
p50/max, input p50/p90, cache hit and billable-equivalent input (uncached + 0.25 × cached,
from the simulated cache over the reply calls), prefix breaks vs window moves, summary
calls, their cache hit (as the scripted provider reported it) and share of the
billable-equivalent input, and the member turns that waited for a summary call (the only
way compaction adds latency to a member's turn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.economy import feed_cache, figures, run_ours, tool_schema
from bench.workload import Workload, generate


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    workload: str
    policy: str
    replies: int
    visible_p50: float
    history_p50: int
    history_max: int
    input_p50: int
    input_p90: int
    hit_rate: float
    billable: int
    prefix_breaks: int
    window_moves: int
    compaction_calls: int
    compaction_hit: float
    compaction_share: float
    waited: int


POLICIES: dict[str, Mapping[str, Any]] = {
    "before (all turns count, no compaction, cap 100)": {
        "history": {"turn_cap_counts": "all", "group": {"max_recent_messages": 100}},
        "compaction": {"enabled": False},
    },
    "answered turns, no compaction, cap 100": {
        "history": {"group": {"max_recent_messages": 100}},
        "compaction": {"enabled": False},
    },
    "answered turns + compaction, cap 100": {"history": {"group": {"max_recent_messages": 100}}},
    "answered turns + compaction, cap 200": {"history": {"group": {"max_recent_messages": 200}}},
    "new defaults (answered turns + compaction, group cap 300)": {},
}


async def measure(name: str, workload: Workload, policy: str) -> Row:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-window-") as tmp:
        variant, requests = await run_ours(workload, Path(tmp) / "run", overrides=POLICIES[policy])
    tools_prefix = json.dumps(
        [tool_schema(s) for s in requests[0].tools], ensure_ascii=False, sort_keys=True
    )
    feed_cache(variant, tools_prefix)
    found = figures(variant)
    billable = sum(r.input_tokens - 0.75 * r.cached_tokens for r in variant.cache)
    return Row(
        workload=name,
        policy=policy,
        replies=found.calls,
        visible_p50=found.visible_p50,
        history_p50=found.history_p50,
        history_max=found.history_max,
        input_p50=found.p50,
        input_p90=found.p90,
        hit_rate=found.hit_rate,
        billable=int(billable),
        prefix_breaks=found.prefix_breaks,
        window_moves=found.window_moves,
        compaction_calls=variant.compaction_calls,
        compaction_hit=variant.compaction_hit,
        compaction_share=variant.compaction_share,
        waited=variant.sync_folds,
    )


def workloads(messages: int, seed: int) -> dict[str, Workload]:
    return {
        "ADR workload": generate(messages, seed),
        "short-message group": generate(
            messages * 3, seed, addressed_share=0.04, tool_share=0.1, quote_share=0.05
        ),
    }


def markdown(rows: Sequence[Row]) -> str:
    lines = [
        "| workload | policy | reply calls | visible msgs p50 | history p50 / max | "
        "input p50 / p90 | cache hit | billable-eq input | prefix breaks / moves | "
        "summary calls | their cache hit | their share | turns waiting for a summary |",
        "|" + "---|" * 13,
    ]
    for r in rows:
        lines.append(
            f"| {r.workload} | {r.policy} | {r.replies} | {r.visible_p50:.0f} | "
            f"{r.history_p50:,} / {r.history_max:,} | {r.input_p50:,} / {r.input_p90:,} | "
            f"{r.hit_rate:.1%} | {r.billable:,} | {r.prefix_breaks} / {r.window_moves} | "
            f"{r.compaction_calls} | {r.compaction_hit:.1%} | {r.compaction_share:.1%} | "
            f"{r.waited} |"
        )
    return "\n".join(lines)


async def run(messages: int, seed: int, policies: Sequence[str]) -> list[Row]:
    rows: list[Row] = []
    for name, workload in workloads(messages, seed).items():
        for policy in policies:
            rows.append(await measure(name, workload, policy))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group_window", description=__doc__)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--policy", action="append", help="run only these policies")
    args = parser.parse_args(argv)
    policies = args.policy or list(POLICIES)
    rows = asyncio.run(run(args.messages, args.seed, policies))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
