"""The usage report's numbers: the ledger aggregated per day (rendering: `usage_render`).

Definitions (one row per calendar day in the bot's zone, plus a total row):
- input per call: the provider-reported `input_tokens`; when a call has none, our estimate
  (`est_fixed + est_history + est_current + est_images`) stands in and the call is counted
  in `estimated_calls`. p50 / p90 are nearest-rank percentiles: the value at rank
  `ceil(p/100 * n)` of the sorted inputs (always an observed value, never interpolated).
- history share / fixed share: `sum(est_history) / sum(est_total)` and
  `sum(est_fixed) / sum(est_total)` from our estimate split.
- reported input is the whole billed input: cache reads (`cached_tokens`) and cache writes
  (`cache_write_tokens`) are parts of it (docs/architecture.md, Tokens, caches and usage
  as billed); a line from before writes were read counts 0 writes.
- cache hit rate: `sum(cached) / sum(reported input)` over calls that reported input; cache
  write rate: `sum(writes) / sum(reported input)`; billable input (`reported input - cached -
  writes`, what is billed at the plain input price) is kept apart.
- billable-equivalent input: `uncached + 0.25 x cached + 1.25 x writes` over calls that
  reported input (a cache read bills about a quarter of an uncached token; a write bills a
  premium, 1.25 x on Anthropic's 5-minute cache, the common case; providers that bill no
  writes report none): the one number to compare window policies by; per call, its mean
  over those calls. Real cost is `cost` where prices are set.
- cache write share: the writes' share of the cost (`cache_write_cost / cost`) where prices
  are set, else of the billable-equivalent input (`1.25 x writes / billable-equivalent`).
- reasoning tokens: `sum(reasoning_tokens)`, the part of the output the models spent
  thinking; 1-hour writes: `sum(cache_write_1h_tokens)`, the part of the writes kept for an
  hour (priced apart in `cost`; the billable-equivalent weighs every write at 1.25 x).
- refusals / cut at length: calls whose `stop` is `refusal` / `length`.
- truncated calls: lines flagged `input_truncated_by_provider` (the provider reported far
  less input than we sent: Ollama drops the oldest messages over its `num_ctx`).
- drift, per route (`provider/model`): `|estimate - reported| / reported` over calls that
  reported input, median and p90 (nearest rank): `raw` for our heuristic (`est_total`),
  `corrected` for `est_corrected` (lines that have it), what budgets and checks used.
- turns: distinct `(session, turn_id)` pairs; calls per turn are bucketed 1 / 2 / 3-5 / 6+.
  A turn that spans midnight counts on both days, once in the total.
- cap turns: turns with a call marked `hit_iteration_cap`; trims: every history trim the
  calls record (a window move and a proactive trim before one call count as two).
- feedback: reactions members put on the bot's messages (stored in the database, not the
  ledger; `with_feedback` adds them): 👍 up, 👎 down, any other reaction "other", on the
  day they were received in the zone.

Only the day files asked for are read; a call lands on the day of its `ts` in the zone (after
a zone change a call may sit in a neighbouring file and is then left out). Lines are decoded
by the ledger's one decoder (`entry_from_json`, through `LedgerScan`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import ledger_file
from bot.agent.ledger_read import LedgerScan

DEFAULT_DAYS = 7
CACHED_WEIGHT = 0.25
CACHE_WRITE_WEIGHT = 1.25
"""A cache write in billable-equivalent input: Anthropic bills a 5-minute write at 1.25 x the
input price (a 1-hour write at 2 x; the real cost, where prices are set, has the exact bill)."""
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
class Drift:
    """How far estimates were from what the provider counted: |estimate - reported| /
    reported over `calls` calls, median and p90 (nearest rank)."""

    calls: int
    median: float
    p90: float


def drift_of_errors(errors: list[float]) -> Drift | None:
    """The drift of already computed absolute relative errors (sorted in place)."""
    if not errors:
        return None
    errors.sort()
    n = len(errors)
    middle = n // 2
    median = errors[middle] if n % 2 else (errors[middle - 1] + errors[middle]) / 2
    return Drift(calls=n, median=median, p90=errors[min(n - 1, math.ceil(0.9 * n) - 1)])


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteDrift:
    """How far our input estimate was from the provider's count on one route."""

    route: str
    raw: Drift
    corrected: Drift | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """Reactions on the bot's messages: 👍, 👎 and every other reaction."""

    up: int = 0
    down: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        return self.up + self.down + self.other

    def plus(self, emoji: str) -> Feedback:
        if emoji == "👍":
            return replace(self, up=self.up + 1)
        if emoji == "👎":
            return replace(self, down=self.down + 1)
        return replace(self, other=self.other + 1)


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
    cache_write_tokens: int = 0
    cache_write_rate: float | None = None
    cache_write_cost: float | None = None
    cache_write_share: float | None = None
    """Of the cost where prices are set, else of the billable-equivalent input."""
    truncated_calls: int = 0
    reasoning_tokens: int = 0
    cache_write_1h_tokens: int = 0
    refusals: int = 0
    cut_at_length: int = 0
    billable_input_tokens: int = 0
    billable_equivalent_tokens: float = 0.0
    billable_equivalent_per_call: float | None = None
    cache_hit_rate: float | None = None
    history_share: float | None = None
    fixed_share: float | None = None
    output_tokens: int = 0
    calls_per_turn: CallsPerTurn = CallsPerTurn()
    cap_turns: int = 0
    trims: int = 0
    errors: int = 0
    cost: float | None = None
    compaction_calls: int = 0
    """Summary calls (`purpose: "compaction"`); counted in the call totals, in no turn."""
    compaction_cost: float | None = None
    compaction_share: float | None = None
    """Their share of the cost where prices are configured, else of the billable-equivalent
    input (uncached + 0.25 × cached)."""
    drift: tuple[RouteDrift, ...] = ()
    feedback: Feedback = Feedback()
    refused_budget: int = 0
    """Calls not made because a spend limit was reached (`refused: budget` lines); they are
    in no other figure."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReport:
    zone: str
    days: tuple[UsageRow, ...]
    total: UsageRow
    chat: int | None = None
    corrupt_lines: int = 0
    partial_lines: int = 0
    currency: str = ""
    """What `cost` is counted in (`[ledger] currency`), for the renderers."""

    def row_for(self, day: date) -> UsageRow:
        for row in self.days:
            if row.day == day:
                return row
        return UsageRow(label=day.isoformat(), day=day)


# ---------------------------------------------------------------- aggregation


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
    tallies = tally_days(entries, zone=zone, days=days, chat=chat)
    if isinstance(entries, LedgerScan):
        corrupt_lines += entries.corrupt
        partial_lines += entries.partial
    return UsageReport(
        zone=str(zone),
        days=tuple(tally.row(day.isoformat(), day) for day, tally in tallies.items()),
        total=total_row(tallies.values()),
        chat=chat,
        corrupt_lines=corrupt_lines,
        partial_lines=partial_lines,
    )


def tally_days(
    entries: Iterable[LedgerEntry], *, zone: tzinfo, days: list[date], chat: int | None = None
) -> dict[date, DayTally]:
    """The running sums of each day of `days` (in order) over `entries` (only `chat`'s when
    given); a call lands on the day of its `ts` in `zone`, calls on other days are left out."""
    tallies = {day: DayTally() for day in days}
    day_of_minute: dict[int, date] = {}  # zone offsets are whole minutes: cache per minute
    for n, entry in enumerate(entries):
        if chat is not None and entry.chat != chat:
            continue
        ts = entry.ts
        minute = int(ts.timestamp()) // 60
        day = day_of_minute.get(minute)
        if day is None:
            day = day_of_minute[minute] = ts.astimezone(zone).date()
        tally = tallies.get(day)
        if tally is not None:
            tally.add(entry, (entry.session, entry.turn_id) if entry.turn_id else (day, n))
    return tallies


def total_row(tallies: Iterable[DayTally]) -> UsageRow:
    """The total row of several days: their tallies merged (the one per-day merge, used by
    the report and by the dashboard's date ranges), so a turn that spans midnight is one turn
    and percentiles are over every call."""
    total = DayTally()
    for tally in tallies:
        total.merge(tally)
    return total.row("total", None)


def with_feedback(
    report: UsageReport, reactions: Iterable[tuple[datetime, int, str]], *, zone: tzinfo
) -> UsageReport:
    """`report` with the reactions `(received at, chat id, emoji)` counted per day (only the
    report's chat when it has one; days outside the report are left out)."""
    per_day = {row.day: row.feedback for row in report.days}
    for at, chat_id, emoji in reactions:
        if report.chat is not None and chat_id != report.chat:
            continue
        day = at.astimezone(zone).date()
        if day in per_day:
            per_day[day] = per_day[day].plus(emoji)
    total = Feedback(
        up=sum(f.up for f in per_day.values()),
        down=sum(f.down for f in per_day.values()),
        other=sum(f.other for f in per_day.values()),
    )
    return replace(
        report,
        days=tuple(replace(row, feedback=per_day[row.day]) for row in report.days),
        total=replace(report.total, feedback=total),
    )


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
    """Read the day files of `days` (only those) and aggregate them; read-only.

    Streams: one day file is in memory at a time."""
    scan = LedgerScan(paths=tuple(ledger_file(traces_dir, day) for day in days))
    return build_report(scan, zone=zone, days=days, chat=chat)


def percentile(sorted_values: list[int], p: float) -> int | None:
    """Nearest-rank percentile of already sorted values (`None` for no values)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


class DayTally:
    """Running sums of one day (or, merged, of several): `add` a call, `merge` another
    day's, `row` the figures."""

    __slots__ = (
        "cached",
        "calls",
        "cap_turns",
        "compaction",
        "compaction_cost",
        "compaction_weight",
        "cost",
        "cut",
        "drift",
        "errors",
        "est_fixed",
        "est_history",
        "est_total",
        "estimated",
        "hour_writes",
        "inputs",
        "output",
        "reasoning",
        "refusals",
        "refused",
        "reported",
        "reporting",
        "trims",
        "truncated",
        "turn_calls",
        "weight",
        "write_cost",
        "write_weight",
        "writes",
    )

    def __init__(self) -> None:
        self.calls = self.estimated = self.reported = self.cached = self.output = 0
        self.reporting = 0
        self.writes = self.truncated = 0
        self.reasoning = self.hour_writes = self.refusals = self.cut = 0
        self.write_cost: float | None = None
        self.write_weight = 0.0
        # (provider, model) -> (raw errors, corrected errors): |estimate - reported| / reported
        self.drift: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
        self.est_fixed = self.est_history = self.est_total = 0
        self.trims = self.errors = self.refused = 0
        self.cost: float | None = None
        self.compaction = 0
        self.compaction_cost: float | None = None
        self.weight = self.compaction_weight = 0.0
        self.inputs: list[int] = []
        self.turn_calls: Counter[object] = Counter()
        self.cap_turns: set[object] = set()

    def add(self, entry: LedgerEntry, turn: object) -> None:
        """Count one call; `turn` identifies its turn (calls per turn, cap turns). A call a
        spend limit refused is counted as that alone: it was never made."""
        if entry.refused == "budget":
            self.refused += 1
            return
        est_fixed = entry.est_fixed
        est_history = entry.est_history
        est_total = est_fixed + est_history + entry.est_current + entry.est_images
        reported = entry.input_tokens
        self.calls += 1
        if reported is None:
            self.inputs.append(est_total)
            self.estimated += 1
        else:
            self._add_reported(entry, reported, est_total)
        self.output += entry.output_tokens or 0
        self.reasoning += entry.reasoning_tokens or 0
        self.hour_writes += entry.cache_write_1h_tokens or 0
        if entry.stop == "refusal":
            self.refusals += 1
        elif entry.stop == "length":
            self.cut += 1
        self.est_fixed += est_fixed
        self.est_history += est_history
        self.est_total += est_total
        weight = _billable_equivalent(
            reported, entry.cached_tokens, entry.cache_write_tokens, est_total
        )
        self.weight += weight
        if entry.input_truncated_by_provider:
            self.truncated += 1
        if entry.cache_write_cost is not None:
            self.write_cost = (self.write_cost or 0.0) + entry.cache_write_cost
        cost = entry.cost
        if entry.purpose == "compaction":  # part of the bill, not of any member's turn
            self.compaction += 1
            self.compaction_weight += weight
            if cost is not None:
                self.compaction_cost = (self.compaction_cost or 0.0) + cost
        elif entry.purpose != "transcription":  # a voice note's text: billed, not a model turn
            self.turn_calls[turn] += 1
        if entry.hit_iteration_cap:
            self.cap_turns.add(turn)
        self.trims += len(entry.trims)
        if entry.error is not None:
            self.errors += 1
        if cost is not None:
            self.cost = cost if self.cost is None else self.cost + cost

    def _add_reported(self, entry: LedgerEntry, reported: int, est_total: int) -> None:
        """The figures of a call whose provider reported its input: the cache's share and
        our estimate's drift from it, per route."""
        self.inputs.append(reported)
        self.reported += reported
        self.cached += entry.cached_tokens or 0
        writes = entry.cache_write_tokens or 0
        self.writes += writes
        self.write_weight += CACHE_WRITE_WEIGHT * writes
        self.reporting += 1
        if reported <= 0:
            return
        route = (entry.provider, entry.model)
        errors = self.drift.get(route)
        if errors is None:
            errors = self.drift[route] = ([], [])
        errors[0].append(abs(est_total - reported) / reported)
        corrected = entry.est_corrected
        if corrected is not None:
            errors[1].append(abs(corrected - reported) / reported)

    def merge(self, other: DayTally) -> None:
        self.calls += other.calls
        self.inputs.extend(other.inputs)
        self.estimated += other.estimated
        self.reported += other.reported
        self.cached += other.cached
        self.writes += other.writes
        self.write_weight += other.write_weight
        self.truncated += other.truncated
        if other.write_cost is not None:
            self.write_cost = (self.write_cost or 0.0) + other.write_cost
        self.reporting += other.reporting
        for route, (raw, corrected) in other.drift.items():
            mine = self.drift.setdefault(route, ([], []))
            mine[0].extend(raw)
            mine[1].extend(corrected)
        self.output += other.output
        self.reasoning += other.reasoning
        self.hour_writes += other.hour_writes
        self.refusals += other.refusals
        self.cut += other.cut
        self.est_fixed += other.est_fixed
        self.est_history += other.est_history
        self.est_total += other.est_total
        self.turn_calls.update(other.turn_calls)
        self.cap_turns |= other.cap_turns
        self.trims += other.trims
        self.errors += other.errors
        self.refused += other.refused
        if other.cost is not None:
            self.cost = other.cost if self.cost is None else self.cost + other.cost
        self.compaction += other.compaction
        self.weight += other.weight
        self.compaction_weight += other.compaction_weight
        if other.compaction_cost is not None:
            self.compaction_cost = (self.compaction_cost or 0.0) + other.compaction_cost

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
            cache_write_tokens=self.writes,
            cache_write_rate=_ratio(self.writes, self.reported),
            cache_write_cost=self.write_cost,
            cache_write_share=self._write_share(),
            truncated_calls=self.truncated,
            reasoning_tokens=self.reasoning,
            cache_write_1h_tokens=self.hour_writes,
            refusals=self.refusals,
            cut_at_length=self.cut,
            billable_input_tokens=self._uncached(),
            billable_equivalent_tokens=self._billable_equivalent(),
            billable_equivalent_per_call=(
                self._billable_equivalent() / self.reporting if self.reporting else None
            ),
            cache_hit_rate=_ratio(self.cached, self.reported),
            history_share=_ratio(self.est_history, self.est_total),
            fixed_share=_ratio(self.est_fixed, self.est_total),
            output_tokens=self.output,
            calls_per_turn=CallsPerTurn(
                one=per_turn["1"],
                two=per_turn["2"],
                three_to_five=per_turn["3-5"],
                six_plus=per_turn["6+"],
                mean=_ratio(self.calls - self.compaction, turns),
            ),
            cap_turns=len(self.cap_turns),
            trims=self.trims,
            errors=self.errors,
            cost=self.cost,
            compaction_calls=self.compaction,
            compaction_cost=self.compaction_cost,
            compaction_share=(
                _ratio(self.compaction_cost or 0.0, self.cost)
                if self.cost
                else _ratio(self.compaction_weight, self.weight)
            )
            if self.compaction
            else None,
            drift=tuple(self._drift()),
            refused_budget=self.refused,
        )

    def _billable_equivalent(self) -> float:
        cached = min(self.cached, self.reported)
        writes = min(self.writes, self.reported - cached)
        return self._uncached() + CACHED_WEIGHT * cached + CACHE_WRITE_WEIGHT * writes

    def _uncached(self) -> int:
        """Reported input billed at the plain input price (neither read nor written)."""
        return max(0, self.reported - self.cached - self.writes)

    def _write_share(self) -> float | None:
        """The writes' share of the cost, else of the billable-equivalent input; None
        when no call reported input."""
        if not self.reporting:
            return None
        if self.cost:
            return _ratio(self.write_cost or 0.0, self.cost)
        return _ratio(self.write_weight, self.weight)

    def _drift(self) -> Iterable[RouteDrift]:
        for (provider, model), (raw, corrected) in sorted(self.drift.items()):
            raw_drift = drift_of_errors(raw)
            if raw_drift is not None:
                yield RouteDrift(
                    route=f"{provider}/{model}",
                    raw=raw_drift,
                    corrected=drift_of_errors(corrected),
                )


def _bucket_name(calls: int) -> str:
    if calls <= 2:
        return str(calls)
    return "3-5" if calls <= 5 else "6+"


def _billable_equivalent(
    reported: int | None, cached: int | None, writes: int | None, estimate: int
) -> float:
    """Uncached + 0.25 × cached + 1.25 × written input (our estimate when the provider
    reported nothing)."""
    if reported is None:
        return float(estimate)
    cached = cached or 0
    writes = writes or 0
    return (reported - cached - writes) + CACHED_WEIGHT * cached + CACHE_WRITE_WEIGHT * writes


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None
