"""Benchmark: `trim_to_recent_turns` against LangChain's `trim_messages` at 1k/10k/100k messages.

Both sides get the same history (a group chat with tool calls: user, assistant call(s),
tool result(s), assistant answer), the same 8,000-token budget and the same per-message
cost, read from a value computed once (our `ChatMessage.tokens`; a dict for LangChain,
whose per-message counter is detected by its `BaseMessage` annotation). LangChain runs with
strategy="last", include_system=True, start_on="human", allow_partial=False.

Columns: our trim alone over a plain list (what LangChain also returns: the kept
messages); the same plus the `HistoryTrimmed` event (dropped messages/turns, tokens before),
computed over the dropped part when read; the agent loop's path: the history held as an
`IndexedHistory` (running totals, built once like LangChain's converted list and cost dict),
trim, event, and the next state with the breadcrumb in front; LangChain; and the speed-ups
of the trim alone and of the agent loop's path. The target is on the agent loop's path.
Run with `python -m bench.bench_trim`; `run()` returns the markdown table.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from bot.context.history_trim import (
    IndexedHistory,
    trim_to_recent_turns,
    with_breadcrumb,
)
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import with_token_estimate
from bot.domain.messages import ChatMessage, ToolCall

BUDGET = 8_000
SIZES = (1_000, 10_000, 100_000)


def build_history(size: int, seed: int = 7) -> list[ChatMessage]:
    """A system prompt, then turns of a group chat with tool calls, `size` messages in all."""
    rng = random.Random(seed)
    out = [with_token_estimate(ChatMessage(role="system", content="You are a helpful bot. " * 40))]
    call = 0
    while len(out) < size:
        out.append(
            with_token_estimate(ChatMessage(role="user", content="hi bot " * rng.randint(2, 30)))
        )
        if rng.random() < 0.4:
            calls = []
            for _ in range(rng.choice((1, 1, 2, 3))):
                call += 1
                args = json.dumps({"query": "weather " * rng.randint(1, 6)})
                calls.append(ToolCall(id=f"call_{call}", name="search", arguments=args))
            out.append(with_token_estimate(ChatMessage(role="assistant", tool_calls=tuple(calls))))
            for c in calls:
                result = "result line\n" * rng.randint(1, 40)
                out.append(
                    with_token_estimate(ChatMessage(role="tool", content=result, tool_call_id=c.id))
                )
        out.append(
            with_token_estimate(ChatMessage(role="assistant", content="ok " * rng.randint(3, 60)))
        )
    return out[:size]


def _langchain(history: Sequence[ChatMessage]) -> Callable[[], object]:
    """A zero-argument call of LangChain's trim on an equivalent history."""
    from langchain_core.messages import (  # imported here: a bench-only dependency
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        trim_messages,
    )

    converted: list[BaseMessage] = []
    cost: dict[int, int] = {}
    for message in history:
        lc: BaseMessage
        match message.role:
            case "system":
                lc = SystemMessage(content=message.content)
            case "user":
                lc = HumanMessage(content=message.content)
            case "assistant":
                calls: list[Any] = [
                    {"id": c.id, "name": c.name, "args": json.loads(c.arguments)}
                    for c in message.tool_calls
                ]
                lc = AIMessage(content=message.content, tool_calls=calls)
            case "tool":
                lc = ToolMessage(content=message.content, tool_call_id=message.tool_call_id or "")
        converted.append(lc)
        cost[id(lc)] = message.tokens or 0

    def per_message(message: BaseMessage) -> int:
        return cost[id(message)]

    # LangChain detects a per-message counter by the annotation object itself; postponed
    # annotations would leave the string "BaseMessage" there
    per_message.__annotations__["message"] = BaseMessage

    def call() -> object:
        return trim_messages(
            converted,
            max_tokens=BUDGET,
            token_counter=per_message,
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        )

    return call


def _median_ms(call: Callable[[], object], repeats: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1_000


def _event(history: Sequence[ChatMessage]) -> HistoryTrimmed:
    """The trim and the event the runtime emits for it."""
    result = trim_to_recent_turns(history, BUDGET)
    return HistoryTrimmed.from_result(
        result, reason="token_budget", budget=BUDGET, session=1, turn_id="t"
    )


def _runtime_path(history: IndexedHistory) -> tuple[HistoryTrimmed, IndexedHistory]:
    """What the agent loop does per trim: trim, event, next state with the breadcrumb."""
    result = trim_to_recent_turns(history, BUDGET)
    event = HistoryTrimmed.from_result(
        result, reason="token_budget", budget=BUDGET, session=1, turn_id="t"
    )
    return event, IndexedHistory(with_breadcrumb(result.messages))


@dataclass(frozen=True, slots=True)
class TrimRow:
    size: int
    kept: int
    ours_ms: float
    figures_ms: float
    runtime_ms: float
    index_ms: float
    langchain_ms: float

    @property
    def speedup(self) -> float:
        """Trim alone."""
        return self.langchain_ms / self.ours_ms

    @property
    def runtime_speedup(self) -> float:
        """The agent loop's path (trim + event + next state): the target's figure."""
        return self.langchain_ms / self.runtime_ms


def _interleaved_ms(calls: Sequence[Callable[[], object]], rounds: int) -> list[float]:
    """Median ms of each call, timed round-robin: one call of each per round, so a burst of
    load on the shared machine hits every column alike instead of one."""
    for call in calls:
        call()  # warm-up
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for call, spent in zip(calls, times, strict=True):
            started = time.perf_counter()
            call()
            spent.append(time.perf_counter() - started)
    return [statistics.median(spent) * 1_000 for spent in times]


def measure(sizes: Sequence[int] = SIZES) -> list[TrimRow]:
    rows = []
    for size in sizes:
        history = build_history(size)
        rounds = 60 if size <= 10_000 else 9
        indexed = IndexedHistory(history)
        ours, figures, runtime, theirs = _interleaved_ms(
            (
                partial(trim_to_recent_turns, history, BUDGET),
                partial(_event, history),
                partial(_runtime_path, indexed),
                _langchain(history),
            ),
            rounds,
        )
        index = _median_ms(partial(IndexedHistory, history), 9)
        kept = len(trim_to_recent_turns(history, BUDGET).messages)
        rows.append(TrimRow(size, kept, ours, figures, runtime, index, theirs))
    return rows


def table(rows: Sequence[TrimRow]) -> str:
    return "\n".join(
        [
            f"Trim to {BUDGET:,} tokens (median ms per call, lower is better)",
            "",
            "| messages | trim alone (list) | trim + event (list) "
            "| agent loop: trim + event + next state (IndexedHistory) "
            "| LangChain trim_messages | speed-up, trim alone | speed-up, agent loop "
            "| building the IndexedHistory (once) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            *(
                f"| {r.size:,} (kept {r.kept}) | {r.ours_ms:.3f} | {r.figures_ms:.3f} "
                f"| {r.runtime_ms:.3f} | {r.langchain_ms:.3f} | {r.speedup:.0f}x "
                f"| {r.runtime_speedup:.1f}x | {r.index_ms:.2f} |"
                for r in rows
            ),
        ]
    )


def run(sizes: Sequence[int] = SIZES) -> str:
    return table(measure(sizes))


if __name__ == "__main__":
    print(run())
