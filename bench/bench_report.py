"""Benchmark: `tgbot usage report` over a generated month of 200,000 ledger lines."""

from __future__ import annotations

import io
import random
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import ledger_file
from bot.agent.ledger_read import read_entries
from bot.agent.ledger_trims import TrimInfo
from bot.services.usage_render import run_usage_report
from bot.services.usage_report import build_report

LINES = 200_000
DAYS = 30
ZONE = ZoneInfo("Asia/Shanghai")
FIRST_DAY = date(2026, 3, 1)
REPEATS = 3


def write_month(traces_dir: Path, *, lines: int = LINES, days: int = DAYS) -> int:
    """Write `lines` realistic entries spread over `days` day files; returns bytes written."""
    rng = random.Random(7)
    traces_dir.mkdir(parents=True, exist_ok=True)
    per_day = lines // days
    written = 0
    for d in range(days):
        day = FIRST_DAY + timedelta(days=d)
        start = datetime(day.year, day.month, day.day, tzinfo=ZONE).astimezone(UTC)
        out: list[str] = []
        turn = 0
        iteration = 0
        session = 1
        for i in range(per_day + (lines % days if d == days - 1 else 0)):
            if iteration == 0 or rng.random() < 0.6:
                turn += 1
                iteration = 0
                session = rng.randint(1, 40)
            iteration += 1
            reported = rng.random() > 0.05
            history = rng.randint(2_000, 8_000)
            entry = LedgerEntry(
                ts=start + timedelta(seconds=i * 86_400 / per_day),
                session=session,
                chat=-1000 - session,
                scene="group",
                turn_id=f"{d}-{turn}",
                iteration=iteration,
                provider="deepseek",
                model="deepseek-chat",
                input_tokens=2_500 + history + 1_900 if reported else None,
                cached_tokens=rng.randint(0, 2_500 + history) if reported else None,
                output_tokens=rng.randint(20, 600) if reported else None,
                est_fixed=2_500,
                est_history=history,
                est_current=1_900,
                trims=(
                    TrimInfo(
                        reason="token_budget",
                        dropped_turns=2,
                        dropped_messages=6,
                        kept_turns=20,
                        tokens_before=9_000,
                        tokens_after=6_000,
                        budget=8_000,
                    ),
                )
                if rng.random() < 0.03
                else (),
                latency_ms=rng.randint(300, 9_000),
                error="ProviderUnavailable: 502 Bad Gateway" if rng.random() < 0.01 else None,
                hit_iteration_cap=rng.random() < 0.002,
                cost=round(rng.random() / 1_000, 6),
                tool_calls=rng.randint(0, 2),
            )
            out.append(entry.to_json_line())
        text = "".join(out).encode()
        ledger_file(traces_dir, day).write_bytes(text)
        written += len(text)
    return written


def run(lines: int = LINES) -> str:
    """Generate the month in a temp dir, time the report (table and JSON), return markdown."""
    with tempfile.TemporaryDirectory() as tmp:
        traces = Path(tmp) / "agent-traces"
        size = write_month(traces, lines=lines)
        today = FIRST_DAY + timedelta(days=DAYS - 1)
        rows = []
        for as_json in (False, True):
            times = []
            for _ in range(REPEATS):
                out = io.StringIO()
                t0 = time.perf_counter()
                code = run_usage_report(
                    traces,
                    zone=ZONE,
                    today=today,
                    days=DAYS,
                    since=None,
                    as_json=as_json,
                    chat=None,
                    out=out,
                )
                times.append(time.perf_counter() - t0)
                assert code == 0, out.getvalue()
            name = f"run_usage_report, {'json' if as_json else 'table'}"
            rows.append(_row(name, lines, size, times))
        days = [FIRST_DAY + timedelta(days=i) for i in range(DAYS)]
        times = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            build_report(read_entries(traces, start=days[0], end=days[-1]), zone=ZONE, days=days)
            times.append(time.perf_counter() - t0)
        rows.append(_row("build_report over LedgerEntry objects", lines, size, times))
    return "\n".join(
        [
            f"## usage report over {DAYS} days",
            "",
            "| path | lines | ledger size | best | median |",
            "|---|---:|---:|---:|---:|",
            *rows,
        ]
    )


def _row(name: str, lines: int, size: int, times: list[float]) -> str:
    return (
        f"| {name} | {lines:,} | {size / 1e6:.0f} MB "
        f"| {min(times) * 1000:.0f} ms | {statistics.median(times) * 1000:.0f} ms |"
    )


if __name__ == "__main__":
    print(run())
