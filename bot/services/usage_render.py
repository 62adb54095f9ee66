"""The usage report on screen: a table for terminals and pipes, JSON, and the command.

`run_usage_report` is the body of `tgbot usage report` (the app's CLI calls it): it picks
the days, loads the report (`usage_report`), and prints it: JSON with `--json`, a rich
table on a terminal, the same table as plain text in a pipe.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import date, datetime, tzinfo
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from bot.services.usage_report import (
    RouteDrift,
    UsageReport,
    UsageRow,
    load_report,
    report_days,
    with_feedback,
)

FeedbackSource = Callable[[list[date]], Iterable[tuple[datetime, int, str]]]
"""Reactions `(received at, chat id, emoji)` on the given days, read from the store."""

TABLE_WIDTH = 100


def run_usage_report(
    traces_dir: Path,
    *,
    zone: tzinfo,
    today: date,
    days: int | None,
    since: date | None,
    as_json: bool,
    chat: int | None,
    out: TextIO,
    feedback: FeedbackSource | None = None,
    currency: str = "",
) -> int:
    """`tgbot usage report`: print the report; 0 on success, 2 on a bad span, 1 on I/O errors.

    Writes nothing and creates nothing: a missing traces directory prints an empty report.
    """
    try:
        selected = report_days(today, days=days, since=since)
    except ValueError as exc:
        out.write(f"error: {exc}\n")
        return 2
    try:
        report = load_report(traces_dir, zone=zone, days=selected, chat=chat)
        if feedback is not None:
            report = with_feedback(report, feedback(selected), zone=zone)
        report = replace(report, currency=currency)
    except OSError as exc:
        out.write(f"error: cannot read the ledger in {traces_dir}: {exc.strerror or exc}\n")
        return 1
    if as_json:
        out.write(to_json(report) + "\n")
    elif _is_tty(out):
        Console(file=out, width=max(TABLE_WIDTH, Console(file=out).width)).print(
            _renderable(report)
        )
    else:
        out.write(render_table(report))
    return 0


def _is_tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def to_json(report: UsageReport) -> str:
    return json.dumps(_report_dict(report), ensure_ascii=False, indent=2)


def _report_dict(report: UsageReport) -> dict[str, Any]:
    return {
        "zone": report.zone,
        "chat": report.chat,
        "percentiles": "nearest-rank",
        "currency": report.currency or None,
        "days": [_row_dict(row) for row in report.days],
        "total": _row_dict(report.total),
        "drift": [_drift_dict(d) for d in report.total.drift],
        "corrupt_lines": report.corrupt_lines,
        "partial_lines": report.partial_lines,
    }


def _row_dict(row: UsageRow) -> dict[str, Any]:
    per_turn = row.calls_per_turn
    return {
        "day": None if row.day is None else row.day.isoformat(),
        "calls": row.calls,
        "turns": row.turns,
        "estimated_calls": row.estimated_calls,
        "input_per_call_p50": row.input_p50,
        "input_per_call_p90": row.input_p90,
        "input_tokens": row.input_tokens,
        "reported_input_tokens": row.reported_input_tokens,
        "cached_tokens": row.cached_tokens,
        "cache_write_tokens": row.cache_write_tokens,
        "cache_write_rate": _round(row.cache_write_rate),
        "cache_write_cost": None
        if row.cache_write_cost is None
        else round(row.cache_write_cost, 6),
        "cache_write_share": _round(row.cache_write_share),
        "truncated_calls": row.truncated_calls,
        "reasoning_tokens": row.reasoning_tokens,
        "cache_write_1h_tokens": row.cache_write_1h_tokens,
        "refusals": row.refusals,
        "cut_at_length": row.cut_at_length,
        "billable_input_tokens": row.billable_input_tokens,
        "billable_equivalent_input_tokens": round(row.billable_equivalent_tokens),
        "billable_equivalent_per_call": _round(row.billable_equivalent_per_call),
        "cache_hit_rate": _round(row.cache_hit_rate),
        "history_share": _round(row.history_share),
        "fixed_share": _round(row.fixed_share),
        "output_tokens": row.output_tokens,
        "calls_per_turn": per_turn.as_dict(),
        "calls_per_turn_mean": _round(per_turn.mean),
        "cap_turns": row.cap_turns,
        "trims": row.trims,
        "errors": row.errors,
        "refused": {"budget": row.refused_budget},
        "cost": None if row.cost is None else round(row.cost, 6),
        "compaction_calls": row.compaction_calls,
        "compaction_cost": None if row.compaction_cost is None else round(row.compaction_cost, 6),
        "compaction_share": _round(row.compaction_share),
        "feedback": {
            "up": row.feedback.up,
            "down": row.feedback.down,
            "other": row.feedback.other,
        },
    }


def _drift_dict(drift: RouteDrift) -> dict[str, Any]:
    corrected = drift.corrected
    return {
        "route": drift.route,
        "calls": drift.raw.calls,
        "raw_median": _round(drift.raw.median),
        "raw_p90": _round(drift.raw.p90),
        "corrected_calls": 0 if corrected is None else corrected.calls,
        "corrected_median": None if corrected is None else _round(corrected.median),
        "corrected_p90": None if corrected is None else _round(corrected.p90),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def render_table(report: UsageReport, *, width: int = TABLE_WIDTH) -> str:
    """The report as plain text for a terminal or a pipe (no colour codes)."""
    console = Console(
        record=True, width=width, file=io.StringIO(), color_system=None, force_terminal=False
    )
    console.print(_renderable(report))
    text = console.export_text(styles=False)
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def _renderable(report: UsageReport) -> RenderableType:
    scope = f" · chat {report.chat}" if report.chat is not None else ""
    calls = _table(
        f"Input per model call · {report.zone}{scope}",
        (
            "day",
            "calls",
            "in p50",
            "in p90",
            "est",
            "history",
            "fixed",
            "hit",
            "write",
            "bill-eq/call",
            "output",
            f"cost {report.currency}".rstrip(),
        ),
    )
    turns = _table(
        "Turns",
        ("day", "turns", "calls/turn", "1", "2", "3-5", "6+", "hit cap", "trims", "errors"),
    )
    for row in report.days:
        calls.add_row(*_call_cells(row))
        turns.add_row(*_turn_cells(row))
    for table, cells in ((calls, _call_cells), (turns, _turn_cells)):
        table.add_section()
        table.add_row(*cells(report.total), style="bold")
    drift = _table(
        "Estimate vs reported input, per route (absolute error)",
        ("route", "calls", "raw p50", "raw p90", "corrected p50", "corrected p90"),
    )
    for route in report.total.drift:
        drift.add_row(*_drift_cells(route))
    notes = Text(
        "in p50/p90: input tokens per call (nearest rank), as the provider reported them or, "
        "for the `est` calls, our estimate. history/fixed: share of our input estimate. "
        "hit: cache reads / reported input; write: cache writes / reported input "
        "(both are parts of the reported input). bill-eq/call: billable-equivalent input "
        "per call, uncached + 0.25 x reads + 1.25 x writes (cost: at the configured "
        "prices). "
        "calls/turn: mean, then turns by number of model calls (summary calls count in "
        "calls, in no turn). Drift: |estimate - "
        "reported| / reported; corrected = what budgets and the capacity check used.",
        style="dim",
    )
    parts: list[RenderableType] = [calls, turns]
    if report.total.feedback.total:
        parts.append(_feedback_table(report))
    if report.total.drift:
        parts.append(drift)
    parts.append(notes)
    parts.extend(_total_notes(report.total))
    if report.corrupt_lines or report.partial_lines:
        parts.append(
            Text(
                f"skipped {report.corrupt_lines} corrupt and {report.partial_lines} partial "
                "ledger lines",
                style="yellow",
            )
        )
    return Group(*parts)


def _table(title: str, headers: tuple[str, ...]) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in headers:
        table.add_column(header, justify="left" if header == "day" else "right", no_wrap=True)
    return table


def _feedback_table(report: UsageReport) -> Table:
    feedback = _table("Feedback reactions on the bot's messages", ("day", "👍", "👎", "other"))
    for row in (*report.days, report.total):
        if row is report.total:
            feedback.add_section()
        counts = row.feedback
        feedback.add_row(
            row.label,
            f"{counts.up:,}",
            f"{counts.down:,}",
            f"{counts.other:,}",
            style="bold" if row is report.total else None,
        )
    return feedback


def _total_notes(total: UsageRow) -> list[RenderableType]:
    """One line for each part of the bill the period had (compaction, cache writes,
    reasoning, stops, truncation, budget refusals)."""
    parts: list[RenderableType] = []
    if total.compaction_calls:
        parts.append(
            Text(
                f"compaction: {total.compaction_calls:,} summary calls, "
                f"{format_share(total.compaction_share)} of the "
                + ("cost" if total.cost else "billable-equivalent input (no prices configured)")
            )
        )
    if total.cache_write_tokens:
        parts.append(
            Text(
                f"cache writes: {format_tokens(total.cache_write_tokens)} tokens, "
                f"{format_share(total.cache_write_share)} of the "
                + ("cost" if total.cost else "billable-equivalent input")
            )
        )
    if total.cache_write_1h_tokens:
        parts.append(
            Text(f"1-hour cache writes: {format_tokens(total.cache_write_1h_tokens)} tokens")
        )
    if total.reasoning_tokens:
        parts.append(
            Text(
                f"reasoning: {format_tokens(total.reasoning_tokens)} of the "
                f"{format_tokens(total.output_tokens)} output tokens"
            )
        )
    if total.refusals or total.cut_at_length:
        parts.append(
            Text(
                f"stops: {total.refusals:,} refused, {total.cut_at_length:,} cut at the "
                "output limit"
            )
        )
    if total.truncated_calls:
        parts.append(
            Text(
                f"{total.truncated_calls:,} calls reported far less input than was sent: the "
                "provider dropped the oldest messages (Ollama: raise num_ctx)",
                style="yellow",
            )
        )
    if total.refused_budget:
        parts.append(
            Text(f"refused: budget {total.refused_budget:,} calls (a spend limit was reached)")
        )
    return parts


def _call_cells(row: UsageRow) -> tuple[str, ...]:
    return (
        row.label,
        f"{row.calls:,}",
        format_tokens(row.input_p50),
        format_tokens(row.input_p90),
        f"{row.estimated_calls:,}" if row.estimated_calls else "-",
        format_share(row.history_share),
        format_share(row.fixed_share),
        format_share(row.cache_hit_rate),
        format_share(row.cache_write_rate),
        format_tokens(
            None
            if row.billable_equivalent_per_call is None
            else round(row.billable_equivalent_per_call)
        ),
        format_tokens(row.output_tokens if row.calls else None),
        format_cost(row.cost),
    )


def _turn_cells(row: UsageRow) -> tuple[str, ...]:
    per_turn = row.calls_per_turn
    return (
        row.label,
        f"{row.turns:,}",
        "-" if per_turn.mean is None else f"{per_turn.mean:.2f}",
        *(f"{n:,}" for n in per_turn.as_dict().values()),
        f"{row.cap_turns:,}",
        f"{row.trims:,}",
        f"{row.errors:,}",
    )


def _drift_cells(drift: RouteDrift) -> tuple[str, ...]:
    corrected = drift.corrected
    return (
        drift.route,
        f"{drift.raw.calls:,}",
        format_error(drift.raw.median),
        format_error(drift.raw.p90),
        "-" if corrected is None else format_error(corrected.median),
        "-" if corrected is None else format_error(corrected.p90),
    )


def format_error(value: float) -> str:
    """A relative error: `4.2%`."""
    return f"{value * 100:.1f}%"


def format_tokens(value: int | None) -> str:
    """`9.8k`, `1.25M`; `-` for none."""
    if value is None:
        return "-"
    if value < 1_000:
        return str(value)
    if value < 1_000_000:
        return f"{value / 1_000:.1f}k"
    return f"{value / 1_000_000:.2f}M"


def format_share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def format_cost(value: float | None, currency: str = "") -> str:
    """`0.0123 USD`, `12.50 USD`; `-` for none (no price configured)."""
    if value is None:
        return "-"
    amount = f"{value:.4f}" if value < 10 else f"{value:,.2f}"
    return f"{amount} {currency}" if currency else amount
