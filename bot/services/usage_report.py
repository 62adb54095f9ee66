"""The usage report: per-day aggregation of the ledger, rendered as a table or JSON.

Definitions (one row per calendar day in the bot's zone, plus a total row):
- input per call: the provider-reported `input_tokens`; when a call has none, our estimate
  (`est_fixed + est_history + est_current + est_images`) stands in and the call is counted
  in `estimated_calls`. p50 / p90 are nearest-rank percentiles: the value at rank
  `ceil(p/100 * n)` of the sorted inputs (always an observed value, never interpolated).
- history share / fixed share: `sum(est_history) / sum(est_total)` and
  `sum(est_fixed) / sum(est_total)` from our estimate split.
- cache hit rate: `sum(cached) / sum(reported input)` over calls that reported input;
  billable input (`reported input - cached`) is kept apart.
- turns: distinct `(session, turn_id)` pairs; calls per turn are bucketed 1 / 2 / 3-5 / 6+.
  A turn that spans midnight counts on both days, once in the total.
- cap turns: turns with a call marked `hit_iteration_cap`; trims: calls carrying trim info.

Only the day files asked for are read; a call lands on the day of its `ts` in the zone (after
a zone change a call may sit in a neighbouring file and is then left out).
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from bot.agent.ledger import LedgerEntry, LedgerScan, ledger_file

DEFAULT_DAYS = 7
TABLE_WIDTH = 100
CALLS_PER_TURN_BUCKETS = ("1", "2", "3-5", "6+")


@dataclass(frozen=True, slots=True, kw_only=True)
class CallsPerTurn:
    """How many model calls the turns took."""

    one: int = 0
    two: int = 0
    three_to_five: int = 0
    six_plus: int = 0
    mean: float | None = None

    def as_dict(self) -> dict[str, int]:
        return dict(
            zip(
                CALLS_PER_TURN_BUCKETS,
                (self.one, self.two, self.three_to_five, self.six_plus),
                strict=True,
            )
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    """One day (or the total, `day is None`). Ratios are `None` when their base is zero."""

    label: str
    day: date | None
    calls: int = 0
    turns: int = 0
    estimated_calls: int = 0
    input_p50: int | None = None
    input_p90: int | None = None
    input_tokens: int = 0
    reported_input_tokens: int = 0
    cached_tokens: int = 0
    billable_input_tokens: int = 0
    cache_hit_rate: float | None = None
    history_share: float | None = None
    fixed_share: float | None = None
    output_tokens: int = 0
    calls_per_turn: CallsPerTurn = CallsPerTurn()
    cap_turns: int = 0
    trims: int = 0
    errors: int = 0
    cost: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReport:
    zone: str
    days: tuple[UsageRow, ...]
    total: UsageRow
    chat: int | None = None
    corrupt_lines: int = 0
    partial_lines: int = 0

    def row_for(self, day: date) -> UsageRow:
        for row in self.days:
            if row.day == day:
                return row
        return UsageRow(label=day.isoformat(), day=day)


# ---------------------------------------------------------------- aggregation

# One call reduced to what the report needs, as a plain tuple (cheap to build from a dict):
# (day, turn key, input, estimated, reported input, cached, output, est fixed, est history,
#  est total, hit cap, trimmed, error, cost)
_Call = tuple[date, object, int, bool, int, int, int, int, int, int, bool, bool, bool, float | None]


def build_report(
    entries: Iterable[LedgerEntry],
    *,
    zone: tzinfo,
    days: list[date],
    chat: int | None = None,
    corrupt_lines: int = 0,
    partial_lines: int = 0,
) -> UsageReport:
    """Aggregate `entries` into one row per day of `days` (in order) and a total row.

    When `entries` is a `LedgerScan`, its corrupt/partial counts (final once it has been
    consumed here) are added to `corrupt_lines` / `partial_lines`.
    """
    buckets = _fill(_calls_from_entries(entries, zone, chat), days)
    if isinstance(entries, LedgerScan):
        corrupt_lines += entries.corrupt
        partial_lines += entries.partial
    return _finish(
        buckets,
        zone=zone,
        chat=chat,
        corrupt_lines=corrupt_lines,
        partial_lines=partial_lines,
    )


def percentile(sorted_values: list[int], p: float) -> int | None:
    """Nearest-rank percentile of already sorted values (`None` for no values)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


class _Bucket:
    """Running sums of one day (or the total)."""

    __slots__ = (
        "cached",
        "calls",
        "cap_turns",
        "cost",
        "errors",
        "est_fixed",
        "est_history",
        "est_total",
        "estimated",
        "inputs",
        "output",
        "reported",
        "trims",
        "turn_calls",
    )

    def __init__(self) -> None:
        self.calls = self.estimated = self.reported = self.cached = self.output = 0
        self.est_fixed = self.est_history = self.est_total = 0
        self.trims = self.errors = 0
        self.cost: float | None = None
        self.inputs: list[int] = []
        self.turn_calls: Counter[object] = Counter()
        self.cap_turns: set[object] = set()

    def add(self, call: _Call) -> None:
        (
            _,
            turn,
            tokens,
            estimated,
            reported,
            cached,
            output,
            est_fixed,
            est_history,
            est_total,
            hit_cap,
            trimmed,
            error,
            cost,
        ) = call
        self.calls += 1
        self.inputs.append(tokens)
        self.estimated += estimated
        self.reported += reported
        self.cached += cached
        self.output += output
        self.est_fixed += est_fixed
        self.est_history += est_history
        self.est_total += est_total
        self.turn_calls[turn] += 1
        if hit_cap:
            self.cap_turns.add(turn)
        self.trims += trimmed
        self.errors += error
        if cost is not None:
            self.cost = cost if self.cost is None else self.cost + cost

    def merge(self, other: _Bucket) -> None:
        self.calls += other.calls
        self.inputs.extend(other.inputs)
        self.estimated += other.estimated
        self.reported += other.reported
        self.cached += other.cached
        self.output += other.output
        self.est_fixed += other.est_fixed
        self.est_history += other.est_history
        self.est_total += other.est_total
        self.turn_calls.update(other.turn_calls)
        self.cap_turns |= other.cap_turns
        self.trims += other.trims
        self.errors += other.errors
        if other.cost is not None:
            self.cost = other.cost if self.cost is None else self.cost + other.cost

    def row(self, label: str, day: date | None) -> UsageRow:
        inputs = sorted(self.inputs)
        per_turn = Counter(_bucket_name(n) for n in self.turn_calls.values())
        turns = len(self.turn_calls)
        return UsageRow(
            label=label,
            day=day,
            calls=self.calls,
            turns=turns,
            estimated_calls=self.estimated,
            input_p50=percentile(inputs, 50),
            input_p90=percentile(inputs, 90),
            input_tokens=sum(inputs),
            reported_input_tokens=self.reported,
            cached_tokens=self.cached,
            billable_input_tokens=self.reported - self.cached,
            cache_hit_rate=_ratio(self.cached, self.reported),
            history_share=_ratio(self.est_history, self.est_total),
            fixed_share=_ratio(self.est_fixed, self.est_total),
            output_tokens=self.output,
            calls_per_turn=CallsPerTurn(
                one=per_turn["1"],
                two=per_turn["2"],
                three_to_five=per_turn["3-5"],
                six_plus=per_turn["6+"],
                mean=_ratio(self.calls, turns),
            ),
            cap_turns=len(self.cap_turns),
            trims=self.trims,
            errors=self.errors,
            cost=self.cost,
        )


def _fill(calls: Iterable[_Call], days: list[date]) -> dict[date, _Bucket]:
    buckets = {day: _Bucket() for day in days}
    for call in calls:
        bucket = buckets.get(call[0])
        if bucket is not None:
            bucket.add(call)
    return buckets


def _finish(
    buckets: dict[date, _Bucket],
    *,
    zone: tzinfo,
    chat: int | None,
    corrupt_lines: int,
    partial_lines: int,
) -> UsageReport:
    total = _Bucket()
    for bucket in buckets.values():
        total.merge(bucket)
    return UsageReport(
        zone=str(zone),
        days=tuple(bucket.row(day.isoformat(), day) for day, bucket in buckets.items()),
        total=total.row("total", None),
        chat=chat,
        corrupt_lines=corrupt_lines,
        partial_lines=partial_lines,
    )


def _calls_from_entries(
    entries: Iterable[LedgerEntry], zone: tzinfo, chat: int | None
) -> Iterator[_Call]:
    for n, e in enumerate(entries):
        if chat is not None and e.chat != chat:
            continue
        est_total = e.est_total
        reported = e.input_tokens
        yield (
            e.ts.astimezone(zone).date(),
            (e.session, e.turn_id) if e.turn_id else n,
            est_total if reported is None else reported,
            reported is None,
            reported or 0,
            (e.cached_tokens or 0) if reported is not None else 0,
            e.output_tokens or 0,
            e.est_fixed,
            e.est_history,
            est_total,
            e.hit_iteration_cap,
            e.trim is not None,
            e.error is not None,
            e.cost,
        )


class _RowReader:
    """Reduces decoded ledger lines straight to `_Call` tuples (no `LedgerEntry` objects).

    It applies the same tolerance as `LedgerEntry.from_json`; a line whose fields have the
    wrong types is counted in `corrupt`.
    """

    def __init__(self, zone: tzinfo, chat: int | None) -> None:
        self.zone = zone
        self.chat = chat
        self.corrupt = 0
        self._days: dict[str, date] = {}

    def calls(self, rows: Iterable[Mapping[str, Any]]) -> Iterator[_Call]:
        for n, row in enumerate(rows):
            try:
                call = self._call(row, n)
            except (ValueError, TypeError, KeyError, AttributeError):
                self.corrupt += 1
                continue
            if call is not None:
                yield call

    def day_of(self, ts: str) -> date:
        """The zone date of an ISO timestamp; our own UTC format is cached per minute."""
        if len(ts) == 29 and ts.endswith("+00:00"):
            key = ts[:16]
            day = self._days.get(key)
            if day is None:
                day = self._days[key] = self._parse_day(ts)
            return day
        return self._parse_day(ts)

    def _parse_day(self, ts: str) -> date:
        parsed = datetime.fromisoformat(ts)
        if parsed.tzinfo is None:
            raise ValueError("naive ts")
        return parsed.astimezone(self.zone).date()

    def _call(self, row: Mapping[str, Any], n: int) -> _Call | None:
        get = row.get
        if self.chat is not None and get("chat") != self.chat:
            return None
        day = self.day_of(row["ts"])
        # Inline int checks: this runs once per ledger line.
        est_fixed = get("est_fixed", 0)
        est_history = get("est_history", 0)
        est_current = get("est_current", 0)
        est_images = get("est_images", 0)
        if not (
            type(est_fixed) is int
            and type(est_history) is int
            and type(est_current) is int
            and type(est_images) is int
        ):
            est_fixed, est_history = _num(est_fixed), _num(est_history)
            est_current, est_images = _num(est_current), _num(est_images)
        est_total = est_fixed + est_history + est_current + est_images
        reported = get("input_tokens")
        if reported is None:
            tokens, reported_n, cached = est_total, 0, 0
        else:
            tokens = reported_n = reported if type(reported) is int else _num(reported)
            cached = get("cached_tokens") or 0
            if type(cached) is not int:
                cached = _num(cached)
        output = get("output_tokens") or 0
        if type(output) is not int:
            output = _num(output)
        cost = get("cost")
        if cost is not None and type(cost) is not float:
            cost = _cost(cost)
        turn_id = get("turn_id")
        return (
            day,
            (get("session"), turn_id) if turn_id else n,
            tokens,
            reported is None,
            reported_n,
            cached,
            output,
            est_fixed,
            est_history,
            est_total,
            get("hit_iteration_cap") is True,
            get("trim") is not None,
            get("error") is not None,
            cost,
        )


def _num(value: Any) -> int:
    if value is None:
        return 0
    if type(value) is int:
        return value
    if type(value) is float:
        return int(value)
    raise TypeError(f"expected a number, got {value!r}")


def _cost(value: Any) -> float | None:
    if value is None:
        return None
    if type(value) is float or type(value) is int:
        return float(value)
    raise TypeError(f"expected a number, got {value!r}")


def _bucket_name(calls: int) -> str:
    if calls <= 2:
        return str(calls)
    return "3-5" if calls <= 5 else "6+"


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


# ---------------------------------------------------------------- the command


def report_days(today: date, *, days: int | None, since: date | None) -> list[date]:
    """The calendar days a report covers: `since`..`today`, or the last `days` (default 7)."""
    if since is not None:
        if since > today:
            raise ValueError(f"--since {since.isoformat()} is after today ({today.isoformat()})")
        start = since
    else:
        count = DEFAULT_DAYS if days is None else days
        if count < 1:
            raise ValueError("--days must be at least 1")
        start = today - timedelta(days=count - 1)
    return [start + timedelta(days=i) for i in range((today - start).days + 1)]


def load_report(
    traces_dir: Path, *, zone: tzinfo, days: list[date], chat: int | None = None
) -> UsageReport:
    """Read the day files of `days` (only those) and aggregate them; read-only."""
    if not days:
        return _finish({}, zone=zone, chat=chat, corrupt_lines=0, partial_lines=0)
    scan = LedgerScan(paths=tuple(ledger_file(traces_dir, day) for day in days))
    reader = _RowReader(zone, chat)
    buckets = _fill(reader.calls(scan.raw()), days)  # streams: one file in memory at a time
    return _finish(
        buckets,
        zone=zone,
        chat=chat,
        corrupt_lines=scan.corrupt + reader.corrupt,
        partial_lines=scan.partial,
    )


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


# ---------------------------------------------------------------- rendering


def to_json(report: UsageReport) -> str:
    return json.dumps(_report_dict(report), ensure_ascii=False, indent=2)


def _report_dict(report: UsageReport) -> dict[str, Any]:
    return {
        "zone": report.zone,
        "chat": report.chat,
        "percentiles": "nearest-rank",
        "days": [_row_dict(row) for row in report.days],
        "total": _row_dict(report.total),
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
        "billable_input_tokens": row.billable_input_tokens,
        "cache_hit_rate": _round(row.cache_hit_rate),
        "history_share": _round(row.history_share),
        "fixed_share": _round(row.fixed_share),
        "output_tokens": row.output_tokens,
        "calls_per_turn": per_turn.as_dict(),
        "calls_per_turn_mean": _round(per_turn.mean),
        "cap_turns": row.cap_turns,
        "trims": row.trims,
        "errors": row.errors,
        "cost": None if row.cost is None else round(row.cost, 6),
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
            "cache hit",
            "billable in",
            "output",
            "cost",
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
    notes = Text(
        "in p50/p90: input tokens per call (nearest rank), as the provider reported them or, "
        "for the `est` calls, our estimate. history/fixed: share of our input estimate. "
        "cache hit: cached / reported input; billable in = reported - cached. "
        "calls/turn: mean, then turns by number of model calls.",
        style="dim",
    )
    parts: list[RenderableType] = [calls, turns, notes]
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
        format_tokens(row.billable_input_tokens if row.reported_input_tokens else None),
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


def format_cost(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if value < 10 else f"{value:,.2f}"
