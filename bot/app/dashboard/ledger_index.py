"""The ledger as the dashboard reads it: one digest per day file, rebuilt only when it changes.

A closed day's file no longer grows, so its digest is computed once and kept (the entries
themselves are dropped). Today's file is read incrementally: each request decodes only the
lines appended since the last one. A month of ledger is therefore read once per process,
and a page costs one small read of today's tail.

Per-day figures come from the usage report's own aggregation: each digest keeps the day's
`DayTally`, and a date range is the report's `total_row` over them, so the overview shows
exactly the numbers `tgbot usage report --json` prints, for one day or a span. Today's file is
followed with `bot.agent.ledger_tail.DayFileTail` (the live feed's reader too). Compaction calls
(`purpose: "compaction"`) are kept per chat beside the trims.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta, tzinfo
from pathlib import Path
from typing import TypeVar

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import ledger_file
from bot.agent.ledger_read import read_entries
from bot.agent.ledger_tail import DayFileTail
from bot.services.usage_report import DayTally, UsageRow, tally_days, total_row

K = TypeVar("K", int, str)

RECENT_CALLS_PER_CHAT = 60
"""Calls kept per chat and day for the chat page's recent turns."""
TRIMS_PER_CHAT = 200
FAILED_PER_DAY = 500
"""Failed calls kept per day for the error list (the newest)."""


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
    tally: DayTally = field(default_factory=DayTally)
    """The day's running sums, merged over a date range by `range_totals`."""
    by_chat: Mapping[int, Spend] = field(default_factory=dict)
    by_model: Mapping[str, Spend] = field(default_factory=dict)
    """Keyed `provider/model`, the route key of the report's drift."""
    failed: tuple[LedgerEntry, ...] = ()
    """The day's failed model calls (the newest `FAILED_PER_DAY`), for the error list."""

    @property
    def billable_equivalent(self) -> float:
        return self.row.billable_equivalent_tokens


def range_totals(digests: Sequence[DayDigest]) -> UsageRow:
    """The figures of a span of days taken together: the report's total row over their
    tallies (percentiles over every call; a turn that spans midnight is one turn)."""
    return total_row(d.tally for d in digests)


@dataclass(slots=True)
class _DayFile:
    """What is known about one day file."""

    key: tuple[int, int, int] | None = None
    """(inode, size, mtime) when `digest` was built."""
    digest: DayDigest | None = None
    tail: DayFileTail | None = None
    """Where today's file was read up to (today's file only)."""
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

    def first_day(self) -> date | None:
        """The first day that has a non-empty ledger file (None: no ledger yet)."""
        if not self.traces_dir.is_dir():
            return None
        found: date | None = None
        for path in self.traces_dir.glob("????-??-??.jsonl"):
            try:
                day = date.fromisoformat(path.stem)
                if path.stat().st_size == 0:
                    continue
            except (ValueError, OSError):
                continue
            if found is None or day < found:
                found = day
        return found

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
            state.key, state.tail, state.entries, state.corrupt = None, None, [], 0
            state.digest = _build(day, [], self.zone, 0)
            return state.digest
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if state.digest is not None and state.key == key:
            return state.digest
        if day >= self._today():
            self._read_tail(path, state)
        else:  # a closed day: read whole, keep the digest only
            scan = read_entries(self.traces_dir, start=day, end=day)
            entries = list(scan)
            state.entries, state.tail = [], None
            state.corrupt = scan.corrupt + scan.partial
            state.digest = _build(day, entries, self.zone, state.corrupt)
            state.key = key
            return state.digest
        state.digest = _build(day, state.entries, self.zone, state.corrupt)
        state.key = key
        return state.digest

    def _read_tail(self, path: Path, state: _DayFile) -> None:
        """Decode the complete lines appended since the last read (all of them after the
        file was replaced or shrank)."""
        if state.tail is None:
            state.tail = DayFileTail(path)
        new, restarted = state.tail.read_new()
        if restarted:
            state.entries = []
        state.entries.extend(new)
        state.corrupt = state.tail.corrupt


def _build(day: date, entries: list[LedgerEntry], zone: tzinfo, corrupt: int) -> DayDigest:
    tally = tally_days(entries, zone=zone, days=[day])[day]
    inputs: list[int] = []
    trims: dict[int, list[LedgerEntry]] = {}
    compactions: dict[int, list[LedgerEntry]] = {}
    recent: dict[int, list[LedgerEntry]] = {}
    by_chat: dict[int, Spend] = {}
    by_model: dict[str, Spend] = {}
    failed: list[LedgerEntry] = []
    down: set[tuple[int, str, int]] = set()  # calls whose route failed: a switch may follow
    for entry in entries:
        if entry.ts.astimezone(zone).date() != day:
            continue  # the report leaves such calls out too
        if entry.refused is not None:  # never made: on the error list only, as the report
            failed.append(entry)
            continue
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
        step = (entry.session, entry.turn_id, entry.iteration)
        if entry.error is not None:
            failed.append(entry)
            down.add(step)
        elif entry.fallback_from is not None and step in down:
            failed.append(entry)  # the switch: the error list shows who took the call
        if entry.purpose == "compaction":
            compactions.setdefault(entry.chat, []).append(entry)
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
        row=tally.row(day.isoformat(), day),
        inputs=tuple(inputs),
        chats=chats,
        corrupt_lines=corrupt,
        tally=tally,
        by_chat=by_chat,
        by_model=by_model,
        failed=tuple(failed[-FAILED_PER_DAY:]),
    )
