"""Reading stored traces back (the dashboard's): one member found from the call id alone.

A trace is found from its id: read that day's indexes (newest segment first, the last line of
an id wins), seek, decompress one member; a day of the layout before segments holds one file
per call. A torn index line is passed over; a member cut short reads as damaged.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import zlib
from datetime import date
from pathlib import Path
from typing import Any

from bot.agent.traces import LEGACY_SUFFIX, call_day, segment_numbers

_INDEX_TAIL = re.compile(rb"(\d{1,15}) (\d{1,15})\n")
"""The rest of an index line after `<call id> `."""


def trace_path(traces_dir: Path, call_id: str) -> Path | None:
    """The file of one call in the layout before segments (`None`: not a call id). Still
    read; no longer written."""
    day = call_day(call_id)
    if day is None:
        return None
    return traces_dir / "calls" / day.isoformat() / f"{call_id}{LEGACY_SUFFIX}"


def read_trace(traces_dir: Path, call_id: str) -> dict[str, Any] | None:
    """The stored trace of `call_id`; `None` when there is none (pruned, or never kept).
    Raises `ValueError` for a damaged one."""
    return TraceReader(traces_dir).read(call_id)


class TraceReader:
    """Reads stored traces, each day's indexes read once (a page that shows many traces
    keeps one reader; a reader does not see what is written after it read a day)."""

    def __init__(self, traces_dir: Path) -> None:
        self.dir = traces_dir / "calls"
        self._indexes: dict[date, list[tuple[int, bytes]]] = {}

    def read(self, call_id: str) -> dict[str, Any] | None:
        """As `read_trace`."""
        day = call_day(call_id)
        if day is None:
            return None
        folder = self.dir / day.isoformat()
        key = call_id.encode() + b" "
        for n, index in self._day(day):
            found = _find(index, key)
            if found is not None:
                return _read_member(folder / f"{n}.gz", *found, call_id=call_id)
        try:
            data = (folder / f"{call_id}{LEGACY_SUFFIX}").read_bytes()
        except FileNotFoundError:
            return None
        return _decode(data, call_id)

    def _day(self, day: date) -> list[tuple[int, bytes]]:
        """The day's indexes, newest segment first."""
        indexes = self._indexes.get(day)
        if indexes is None:
            indexes = []
            for n in sorted(segment_numbers(self.dir / day.isoformat(), "idx"), reverse=True):
                with contextlib.suppress(FileNotFoundError):  # pruned meanwhile
                    indexes.append((n, (self.dir / day.isoformat() / f"{n}.idx").read_bytes()))
            self._indexes[day] = indexes
        return indexes


def _find(index: bytes, key: bytes) -> tuple[int, int] | None:
    """(offset, length) on the last whole line of `key` (a call id and a space) in `index`;
    a line torn by a crash, or run into by the next one, is passed over."""
    end = len(index)
    while (at := index.rfind(key, 0, end)) >= 0:
        match = _INDEX_TAIL.match(index, at + len(key))
        if match is not None:
            return int(match.group(1)), int(match.group(2))
        end = at
    return None


def _read_member(segment: Path, offset: int, length: int, *, call_id: str) -> dict[str, Any] | None:
    try:
        with segment.open("rb") as file:
            file.seek(offset)
            data = file.read(length)
    except FileNotFoundError:  # pruned since its index was read
        return None
    if len(data) != length:
        raise ValueError(f"the trace of {call_id} is damaged: cut short")
    if _member_name(data) != call_id:
        raise ValueError(f"the trace of {call_id} is damaged: another member at its place")
    return _decode(data, call_id)


def _decode(data: bytes, call_id: str) -> dict[str, Any]:
    try:
        trace = json.loads(gzip.decompress(data))
    except (OSError, EOFError, zlib.error, json.JSONDecodeError) as exc:
        raise ValueError(f"the trace of {call_id} is damaged: {exc}") from exc
    if not isinstance(trace, dict):
        raise ValueError(f"the trace of {call_id} is not an object")
    return trace


def _member_name(data: bytes) -> str | None:
    """The file name in a gzip member's header (`encode_trace` puts the call id there)."""
    if len(data) < 10 or data[:3] != b"\x1f\x8b\x08":
        return None
    flags = data[3]
    at = 10
    if flags & 4:  # FEXTRA
        if len(data) < at + 2:
            return None
        at += 2 + int.from_bytes(data[at : at + 2], "little")
    if not flags & 8:  # FNAME
        return None
    end = data.find(b"\x00", at)
    return None if end < 0 else data[at:end].decode("latin-1")
