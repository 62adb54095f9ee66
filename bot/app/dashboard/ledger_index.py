"""The ledger as the dashboard reads it: one digest per day file, rebuilt only when it changes.

A closed day's file no longer grows, so its digest is computed once and kept (the entries
themselves are dropped). Today's file is read incrementally: each request decodes only the
lines appended since the last one. A month of ledger is therefore read once per process,
and a page costs one small read of today's tail.

Per-day figures come from the usage report's own aggregation (`build_report`), so the
overview shows exactly the numbers `tgbot usage report --json` prints. Compaction calls
(`purpose: "compaction"`) are kept per chat beside the trims, and each digest carries
the day's billable-equivalent weight of all calls and of those, so a span of days gets its
compaction share the way the report's total row does.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta, tzinfo
from itertools import chain
from pathlib import Path
from typing import TypeVar

from bot.agent.ledger import LedgerEntry, ledger_file, read_entries
from bot.services.usage_report import (
    CACHE_WRITE_WEIGHT,
    CACHED_WEIGHT,
    UsageRow,
    build_report,
    percentile,
)

K = TypeVar("K", int, str)

RECENT_CALLS_PER_CHAT = 60
"""Calls kept per chat and day for the chat page's recent turns."""
TRIMS_PER_CHAT = 200
CACHED_INPUT_WEIGHT = CACHED_WEIGHT
"""Billable-equivalent input = uncached input + 0.25 × cache reads + 1.25 × cache writes
(docs/architecture.md, Tokens, caches and usage as billed; the weights are the usage report's)."""


def billable_equivalent(row: UsageRow) -> float:
    """Uncached reported input, a quarter of the reads and 1.25 × the writes."""
    return (
        row.billable_input_tokens
        + CACHED_INPUT_WEIGHT * row.cached_tokens
        + CACHE_WRITE_WEIGHT * row.cache_write_tokens
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatDay:
    """One chat's calls on one day: those that trimmed history, the compaction (summary)
    calls, and the newest ones."""

    trims: tuple[LedgerEntry, ...] = ()
    compactions: tuple[LedgerEntry, ...] = ()
    recent: tuple[LedgerEntry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """Where tokens and money went: the calls of one chat or one model, summed."""

    calls: int = 0
    input_tokens: int = 0
    """Reported input (the whole billed input, reads and writes included)."""
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """None when no call of them had a price."""

    def plus(self, other: Spend) -> Spend:
        cost = self.cost
        if other.cost is not None:
            cost = other.cost if cost is None else cost + other.cost
        return Spend(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=cost,
        )


def spend_of(entry: LedgerEntry) -> Spend:
    return Spend(
        calls=1,
        input_tokens=entry.input_tokens or 0,
        cached_tokens=entry.cached_tokens or 0,
        cache_write_tokens=entry.cache_write_tokens or 0,
        output_tokens=entry.output_tokens or 0,
        cost=entry.cost,
    )


def sum_spend(parts: Iterable[Mapping[K, Spend]]) -> dict[K, Spend]:
    """Per-key spend of several days added up."""
    total: dict[K, Spend] = {}
    for part in parts:
        for key, spend in part.items():
            mine = total.get(key)
            total[key] = spend if mine is None else mine.plus(spend)
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class DayDigest:
    """What the dashboard needs from one day file."""

    day: date
    row: UsageRow
    inputs: tuple[int, ...]
    """Input per call, sorted (for percentiles over a date range)."""
    chats: Mapping[int, ChatDay]
    corrupt_lines: int = 0
    weight: float = 0.0
    """Billable-equivalent input of every call, our estimate standing in where the provider
    reported none (the base of the report's compaction share when no price is set)."""
    compaction_weight: float = 0.0
    """The same over the compaction calls only."""
    by_chat: Mapping[int, Spend] = field(default_factory=dict)
    by_model: Mapping[str, Spend] = field(default_factory=dict)
    """Keyed `provider/model`, the route key of the report's drift."""

    @property
    def billable_equivalent(self) -> float:
        return billable_equivalent(self.row)


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeTotals:
    """The figures of a span of days taken together."""

    calls: int
    turns: int
    input_p50: int | None
    input_p90: int | None
    cached_tokens: int
    reported_input_tokens: int
    billable_input_tokens: int
    output_tokens: int
    cache_hit_rate: float | None
    billable_equivalent: float
    cost: float | None
    trims: int
    errors: int
    compaction_calls: int = 0
    compaction_cost: float | None = None
    compaction_share: float | None = None
    """Share of the cost where prices are set, else of the billable-equivalent input (as
    the report's total row); None without a compaction call."""
    cache_write_tokens: int = 0
    cache_write_rate: float | None = None
    """Cache writes / reported input."""
    cache_write_share: float | None = None
    """The writes' share of the cost where prices are set, else of the billable-equivalent
    input (as the report's total row)."""
    truncated_calls: int = 0
    """Calls the provider silently truncated (`input_truncated_by_provider`)."""


def range_totals(digests: Sequence[DayDigest]) -> RangeTotals:
    """Sum the days; percentiles over every call of the span (nearest rank, as the report).
    Turns are summed per day, so a turn that spans midnight counts twice here."""
    inputs = sorted(chain.from_iterable(d.inputs for d in digests))  # sorted runs: fast
    rows = [d.row for d in digests]
    reported = sum(r.reported_input_tokens for r in rows)
    cached = sum(r.cached_tokens for r in rows)
    costs = [r.cost for r in rows if r.cost is not None]
    compaction_costs = [r.compaction_cost for r in rows if r.compaction_cost is not None]
    compaction_calls = sum(r.compaction_calls for r in rows)
    writes = sum(r.cache_write_tokens for r in rows)
    write_costs = [r.cache_write_cost for r in rows if r.cache_write_cost is not None]
    cost = sum(costs) if costs else None
    compaction_cost = sum(compaction_costs) if compaction_costs else None
    share: float | None = None
    if compaction_calls:
        if cost:
            share = (compaction_cost or 0.0) / cost
        else:
            weight = sum(d.weight for d in digests)
            share = sum(d.compaction_weight for d in digests) / weight if weight else None
    write_share: float | None = None
    if reported:
        if cost:
            write_share = sum(write_costs) / cost
        else:
            weight = sum(d.weight for d in digests)
            write_share = CACHE_WRITE_WEIGHT * writes / weight if weight else None
    return RangeTotals(
        calls=sum(r.calls for r in rows),
        turns=sum(r.turns for r in rows),
        input_p50=percentile(inputs, 50),
        input_p90=percentile(inputs, 90),
        cached_tokens=cached,
        reported_input_tokens=reported,
        billable_input_tokens=sum(r.billable_input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
        cache_hit_rate=cached / reported if reported else None,
        billable_equivalent=sum(d.billable_equivalent for d in digests),
        cost=cost,
        trims=sum(r.trims for r in rows),
        errors=sum(r.errors for r in rows),
        compaction_calls=compaction_calls,
        compaction_cost=compaction_cost,
        compaction_share=share,
        cache_write_tokens=writes,
        cache_write_rate=writes / reported if reported else None,
        cache_write_share=write_share,
        truncated_calls=sum(r.truncated_calls for r in rows),
    )


@dataclass(slots=True)
class _DayFile:
    """What is known about one day file."""

    key: tuple[int, int, int] | None = None
    """(inode, size, mtime) when `digest` was built."""
    digest: DayDigest | None = None
    offset: int = 0
    """Bytes decoded so far (today's file only)."""
    entries: list[LedgerEntry] = field(default_factory=list)
    corrupt: int = 0


class LedgerIndex:
    """Day digests of a traces directory, cached per file state. Thread-safe; blocking."""

    def __init__(self, traces_dir: Path, zone: tzinfo, *, today: Callable[[], date]) -> None:
        self.traces_dir = traces_dir
        self.zone = zone
        self._today = today
        self._files: dict[date, _DayFile] = {}
        self._locks: dict[date, threading.Lock] = {}
        self._lock = threading.Lock()

    def warm(self, days: int) -> None:
        """Digest the last `days` days ahead of the first page (a fresh process), newest
        first; a page asking meanwhile waits only for the day being read, if it needs it."""
        today = self._today()
        for n in range(days):
            self.digest(today - timedelta(days=n))

    def digests(self, days: Iterable[date]) -> list[DayDigest]:
        return [self.digest(day) for day in days]

    def digest(self, day: date) -> DayDigest:
        with self._lock:
            lock = self._locks.setdefault(day, threading.Lock())
        with lock:
            return self._digest(day)

    def _digest(self, day: date) -> DayDigest:
        path = ledger_file(self.traces_dir, day)
        with self._lock:
            state = self._files.setdefault(day, _DayFile())
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            state.key, state.offset, state.entries, state.corrupt = None, 0, [], 0
            state.digest = _build(day, [], self.zone, 0)
            return state.digest
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if state.digest is not None and state.key == key:
            return state.digest
        if day >= self._today():
            self._read_tail(path, state, key)
        else:  # a closed day: read whole, keep the digest only
            scan = read_entries(self.traces_dir, start=day, end=day)
            entries = list(scan)
            state.entries, state.offset = [], 0
            state.corrupt = scan.corrupt + scan.partial
            state.digest = _build(day, entries, self.zone, state.corrupt)
            state.key = key
            return state.digest
        state.digest = _build(day, state.entries, self.zone, state.corrupt)
        state.key = key
        return state.digest

    def _read_tail(self, path: Path, state: _DayFile, key: tuple[int, int, int]) -> None:
        """Decode the complete lines appended since the last read (all of them after the
        file was replaced or shrank)."""
        inode, size, _ = key
        if state.key is None or state.key[0] != inode or size < state.offset:
            state.offset, state.entries, state.corrupt = 0, [], 0
        with path.open("rb") as handle:
            handle.seek(state.offset)
            data = handle.read(max(0, size - state.offset))
        end = data.rfind(b"\n") + 1  # an unterminated last line waits for its newline
        for line in data[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                state.entries.append(LedgerEntry.from_json(json.loads(line)))
            except (ValueError, TypeError, KeyError, AttributeError):
                state.corrupt += 1
        state.offset += end


def _build(day: date, entries: list[LedgerEntry], zone: tzinfo, corrupt: int) -> DayDigest:
    report = build_report(entries, zone=zone, days=[day])
    inputs: list[int] = []
    trims: dict[int, list[LedgerEntry]] = {}
    compactions: dict[int, list[LedgerEntry]] = {}
    recent: dict[int, list[LedgerEntry]] = {}
    weight = compaction_weight = 0.0
    by_chat: dict[int, Spend] = {}
    by_model: dict[str, Spend] = {}
    for entry in entries:
        if entry.ts.astimezone(zone).date() != day:
            continue  # the report leaves such calls out too
        spend = spend_of(entry)
        chat_spend = by_chat.get(entry.chat)
        by_chat[entry.chat] = spend if chat_spend is None else chat_spend.plus(spend)
        route = f"{entry.provider}/{entry.model}"
        model_spend = by_model.get(route)
        by_model[route] = spend if model_spend is None else model_spend.plus(spend)
        inputs.append(entry.est_total if entry.input_tokens is None else entry.input_tokens)
        recent.setdefault(entry.chat, []).append(entry)
        if entry.trim is not None:
            trims.setdefault(entry.chat, []).append(entry)
        call_weight = _call_weight(entry)
        weight += call_weight
        if entry.purpose == "compaction":
            compactions.setdefault(entry.chat, []).append(entry)
            compaction_weight += call_weight
    inputs.sort()
    chats = {
        chat: ChatDay(
            trims=tuple(trims.get(chat, ())[-TRIMS_PER_CHAT:]),
            compactions=tuple(compactions.get(chat, ())[-TRIMS_PER_CHAT:]),
            recent=tuple(calls[-RECENT_CALLS_PER_CHAT:]),
        )
        for chat, calls in recent.items()
    }
    return DayDigest(
        day=day,
        row=report.row_for(day),
        inputs=tuple(inputs),
        chats=chats,
        corrupt_lines=corrupt,
        weight=weight,
        compaction_weight=compaction_weight,
        by_chat=by_chat,
        by_model=by_model,
    )


def _call_weight(entry: LedgerEntry) -> float:
    """One call's billable-equivalent input (uncached + 0.25 × reads + 1.25 × writes), or our
    estimate when the provider reported no input: the report's per-call weight."""
    if entry.input_tokens is None:
        return float(entry.est_total)
    cached = entry.cached_tokens or 0
    writes = entry.cache_write_tokens or 0
    return (
        (entry.input_tokens - cached - writes)
        + CACHED_INPUT_WEIGHT * cached
        + CACHE_WRITE_WEIGHT * writes
    )
