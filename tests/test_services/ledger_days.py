"""A small ledger shared by the usage report tests: two days in Shanghai, three turns."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_trims import TrimInfo

SHANGHAI = ZoneInfo("Asia/Shanghai")
D1 = date(2026, 3, 1)
D2 = date(2026, 3, 2)
TRIM = TrimInfo(
    reason="token_budget",
    dropped_turns=1,
    dropped_messages=2,
    kept_turns=9,
    tokens_before=9_000,
    tokens_after=7_000,
    budget=8_000,
)


def at(day: date, hour: int, minute: int = 0) -> datetime:
    """A moment on `day` in Shanghai, as UTC (what the writer stores)."""
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=SHANGHAI).astimezone(UTC)


def call(ts: datetime, turn: str, **changes: object) -> LedgerEntry:
    values: dict[str, object] = {
        "ts": ts,
        "session": 1,
        "chat": -100,
        "scene": "group",
        "turn_id": turn,
        "provider": "deepseek",
        "model": "deepseek-chat",
        "est_fixed": 1_000,
        "est_history": 2_000,
        "est_current": 1_000,
    }
    values.update(changes)
    return LedgerEntry(**values)  # type: ignore[arg-type]


# Day 1 (Shanghai): turn a = 1 call, turn b = 2 calls (one estimated), turn c = 6 calls
# (hits the cap; one call is in another chat). 00:10 Shanghai is still the previous UTC day.
DAY1 = [
    call(at(D1, 0, 10), "a", input_tokens=1_000, cached_tokens=500, output_tokens=10, cost=0.5),
    call(at(D1, 9), "b", input_tokens=3_000, cached_tokens=0, output_tokens=20, trims=(TRIM,)),
    call(at(D1, 9, 1), "b", iteration=2, est_images=100, error="ProviderUnavailable: 502"),
    *[
        call(
            at(D1, 23, 50),
            "c",
            iteration=i + 1,
            input_tokens=10_000 + i,
            cached_tokens=8_000,
            output_tokens=5,
            hit_iteration_cap=i == 5,
            chat=-200 if i == 0 else -100,
        )
        for i in range(6)
    ],
]
# Day 2: turn c continues past midnight (counts on both days, once in the total).
DAY2 = [call(at(D2, 0, 5), "c", iteration=7, purpose="final_summary", input_tokens=12_000)]


def write_ledger(traces: Path, entries: list[LedgerEntry]) -> None:
    writer = LedgerWriter(traces, SHANGHAI)
    for e in entries:
        writer.append(e)
