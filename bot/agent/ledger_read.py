"""Reading the usage ledger: the one decoder of a line (`entry_from_json`) and the scan over
the day files (`read_entries`, `LedgerScan`).

`entry_from_json` is driven by a table of one reader per field; it accepts lines with
missing optional keys, so older or hand-made lines stay readable. `read_entries` never fails
on a bad line: a line that does not parse is counted as `corrupt`, a last line without its
newline that does not parse (a crash mid-write) as `partial`, and both are skipped. The
files themselves are written by `bot.agent.ledger_file`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from operator import call, contains, itemgetter
from pathlib import Path
from typing import Any, cast

from bot.agent.ledger import PURPOSES, STOPS, LedgerEntry, Purpose, Stop
from bot.agent.ledger_file import ledger_file
from bot.agent.ledger_trims import TrimInfo

_BAD_LINE = (ValueError, TypeError, KeyError, AttributeError)


def entry_from_json(data: Mapping[str, Any]) -> LedgerEntry:
    """A `LedgerEntry` from one decoded line; only `ts` is required; `ValueError` on bad shapes.

    The one decoder of the format, driven by `_TABLE`. The usage report reads a month of
    lines through it, so a line as `LedgerWriter` writes it (every key, each value of the
    JSON type `LedgerEntry.to_dict` writes) is taken as it is, checked by type in one pass;
    any other goes through each field's reader (`_tolerant`). Both agree.
    """
    try:
        values = list(_every_key(data))
    except KeyError:  # an older or hand-made line
        return _assemble(_tolerant(data))
    if all(map(contains, _KINDS, map(type, values))):  # as written: taken as it is
        for at in (_TS, _PURPOSE, _TRIMS, _STOP):  # checked further than by their type
            values[at] = _READERS[at](values[at])
    else:
        values = _tolerant(data)
    return _assemble(values)


def _tolerant(data: Mapping[str, Any]) -> list[Any]:
    """The values of any line, each through its field's reader: a missing key reads as
    `null`, numbers of the other JSON kind convert, `null` strings read as empty. Two keys of
    older lines: `trim` (the last trim only, before `trims`) and a missing
    `cache_write_tokens` beside a reported input (the provider reported no writes: 0)."""
    values = list(map(call, _READERS, map(data.get, _KEYS)))
    if data.get("trims") is None:  # an older line: the last trim only, as `trim` (if any)
        trim = data.get("trim")
        values[_TRIMS] = () if trim is None else _trims([trim])
    if "cache_write_tokens" not in data and values[_INPUT] is not None:
        values[_WRITES] = 0
    return values


# The readers test the exact JSON type first: one runs for every field of every line.


def _ts(value: Any) -> datetime:
    ts = datetime.fromisoformat(value) if type(value) is str else None
    if ts is None or ts.tzinfo is None:
        raise ValueError("ledger line without a valid ts")
    return ts


def _int(value: Any, default: int = 0) -> int:
    if type(value) is int:
        return value
    if value is None:
        return default
    if type(value) is float:
        return int(value)
    raise ValueError(f"expected a number, got {value!r}")


def _iteration(value: Any) -> int:
    return _int(value, 1)


def _opt_int(value: Any) -> int | None:
    if type(value) is int or value is None:
        return value
    return _int(value)


def _opt_float(value: Any) -> float | None:
    if type(value) is float or value is None:
        return value
    if type(value) is int:
        return float(value)
    raise ValueError(f"expected a number, got {value!r}")


def _str(value: Any) -> str:
    return value if type(value) is str else str(value or "")


def _opt_str(value: Any) -> str | None:
    return value if type(value) is str or value is None else _str(value)


def _error(value: Any) -> str | None:
    return value if type(value) is str or value is None else str(value)


def _purpose(value: Any) -> Purpose:
    purpose = value or "turn"
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}")
    return cast(Purpose, purpose)


def _stop(value: Any) -> Stop | None:
    if value is not None and value not in STOPS:
        raise ValueError(f"unknown stop {value!r}")
    return cast(Stop | None, value)


def _trims(value: Any) -> tuple[TrimInfo, ...]:
    if value is None:
        return ()
    if type(value) is not list:
        raise ValueError("trims must be a list")
    return tuple(map(_trim_from_json, value))


_NONE: type = type(None)
_INT: frozenset[type] = frozenset({int})
_OPT_INT: frozenset[type] = frozenset({int, _NONE})
_FLAG: frozenset[type] = frozenset({bool})
_TEXT: frozenset[type] = frozenset({str})
_OPT_TEXT: frozenset[type] = frozenset({str, _NONE})
_OPT_FLOAT: frozenset[type] = frozenset({float, _NONE})
_LIST: frozenset[type] = frozenset({list})

_TABLE: tuple[tuple[str, frozenset[type], Callable[[Any], Any]], ...] = (
    ("ts", _TEXT, _ts),
    ("session", _INT, _int),
    ("chat", _INT, _int),
    ("thread", _INT, _int),
    ("scene", _TEXT, _str),
    ("turn_id", _TEXT, _str),
    ("iteration", _INT, _iteration),
    ("purpose", _TEXT, _purpose),
    ("provider", _TEXT, _str),
    ("model", _TEXT, _str),
    ("input_tokens", _OPT_INT, _opt_int),
    ("cached_tokens", _OPT_INT, _opt_int),
    ("output_tokens", _OPT_INT, _opt_int),
    ("est_fixed", _INT, _int),
    ("est_history", _INT, _int),
    ("est_current", _INT, _int),
    ("est_images", _INT, _int),
    ("est_corrected", _OPT_INT, _opt_int),
    ("trims", _LIST, _trims),
    ("latency_ms", _INT, _int),
    ("error", _OPT_TEXT, _error),
    ("hit_iteration_cap", _FLAG, bool),
    ("cost", _OPT_FLOAT, _opt_float),
    ("tool_calls", _INT, _int),
    ("cache_write_tokens", _OPT_INT, _opt_int),
    ("cache_write_cost", _OPT_FLOAT, _opt_float),
    ("input_truncated_by_provider", _FLAG, bool),
    ("call_id", _TEXT, _str),
    ("stop", _OPT_TEXT, _stop),
    ("reasoning_tokens", _OPT_INT, _opt_int),
    ("cache_write_1h_tokens", _OPT_INT, _opt_int),
    ("mcp_tool_calls", _INT, _int),
    ("refused", _OPT_TEXT, _opt_str),
    ("images", _INT, _int),
    ("route", _TEXT, _str),
    ("fallback_from", _OPT_TEXT, _opt_str),
)
"""Every field of `LedgerEntry`: its key on the line, the JSON types `to_dict` writes its
value as, and the reader of any value."""
_KEYS = tuple(key for key, _, _ in _TABLE)
_KINDS = tuple(kinds for _, kinds, _ in _TABLE)
_READERS = tuple(read for _, _, read in _TABLE)
_every_key = itemgetter(*_KEYS)
_TS, _PURPOSE, _TRIMS, _STOP, _INPUT, _WRITES = map(
    _KEYS.index, ("ts", "purpose", "trims", "stop", "input_tokens", "cache_write_tokens")
)
_SLOT_SETTERS = tuple(getattr(LedgerEntry, key).__set__ for key in _KEYS)
_new_entry = object.__new__


def _assemble(values: list[Any]) -> LedgerEntry:
    """A `LedgerEntry` from values its readers checked, set slot by slot.

    Half the cost of `LedgerEntry(**fields)` (keyword binding and the frozen `__setattr__`
    calls dominate it); only `entry_from_json` uses it, after `_ts` checked what `__post_init__`
    would.
    """
    entry: LedgerEntry = _new_entry(LedgerEntry)
    for set_slot, value in zip(_SLOT_SETTERS, values, strict=True):
        set_slot(entry, value)
    return entry


def _trim_from_json(data: Any) -> TrimInfo:
    if not isinstance(data, dict):
        raise ValueError("trim must be an object")
    get = data.get
    return TrimInfo(
        reason=str(get("reason") or ""),
        dropped_turns=_int(get("dropped_turns")),
        dropped_messages=_int(get("dropped_messages")),
        kept_turns=_int(get("kept_turns")),
        tokens_before=_int(get("tokens_before")),
        tokens_after=_int(get("tokens_after")),
        budget=_int(get("budget")),
    )


# ---------------------------------------------------------------- the day files


@dataclass(slots=True)
class LedgerScan:
    """A lazy pass over day files; the counters are final once iteration ends.

    Iterating again re-reads the files and resets the counters. Lines that do not decode are
    counted, never raised: `corrupt` inside a file, `partial` for an unterminated last line.
    """

    paths: tuple[Path, ...]
    corrupt: int = 0
    partial: int = 0
    files_read: int = 0
    lines: int = 0

    def __iter__(self) -> Iterator[LedgerEntry]:
        return self._scan()

    @property
    def entries(self) -> Iterator[LedgerEntry]:
        """Same as iterating the scan."""
        return iter(self)

    def _scan(self) -> Iterator[LedgerEntry]:
        decode = entry_from_json
        self.corrupt = self.partial = self.files_read = self.lines = 0
        for path in self.paths:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            self.files_read += 1
            parts = data.split(b"\n")
            last = parts.pop()  # b"" when the file ends with a newline
            chunks = [part for part in parts if part.strip()]
            tail = last if last.strip() else None
            self.lines += len(chunks) + (tail is not None)
            yield from self._decode_lines(chunks)
            if tail is not None:
                try:
                    item = decode(json.loads(tail))
                except _BAD_LINE:
                    self.partial += 1
                else:
                    yield item

    def _decode_lines(self, chunks: list[bytes]) -> Iterator[LedgerEntry]:
        # One json.loads over the whole file is about twice as fast as one call per line;
        # any failure (or a line holding two values) falls back to line by line.
        decode = entry_from_json
        values: Any = None
        with contextlib.suppress(*_BAD_LINE):
            values = json.loads(b"[" + b",".join(chunks) + b"]")
        if isinstance(values, list) and len(values) == len(chunks):
            for value in values:
                try:
                    item = decode(value)
                except _BAD_LINE:
                    self.corrupt += 1
                else:
                    yield item
            return
        for chunk in chunks:
            try:
                item = decode(json.loads(chunk))
            except _BAD_LINE:
                self.corrupt += 1
            else:
                yield item


def read_entries(
    traces_dir: Path, *, start: date | None = None, end: date | None = None
) -> LedgerScan:
    """Scan the day files from `start` to `end` inclusive (open ends: every file there is).

    Read-only: a missing directory or day file is simply empty.
    """
    return LedgerScan(paths=_day_paths(traces_dir, start, end))


def _day_paths(traces_dir: Path, start: date | None, end: date | None) -> tuple[Path, ...]:
    if start is not None and end is not None:
        count = (end - start).days + 1
        return tuple(ledger_file(traces_dir, start + timedelta(days=i)) for i in range(count))
    if not traces_dir.is_dir():
        return ()
    found: list[tuple[date, Path]] = []
    for path in traces_dir.glob("*.jsonl"):
        try:
            day = date.fromisoformat(path.stem)
        except ValueError:
            continue
        if (start is None or day >= start) and (end is None or day <= end):
            found.append((day, path))
    return tuple(path for _, path in sorted(found))
