"""A trace writer's open day segments: opening one (or the next, past its size), closing them.

`bot.agent.trace_writer.TraceWriter` appends to the open segment of a day; these run only
when none is open yet, when one is full or was pruned by another process, and on close.
Worker thread only, as the writer's appends.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bot.agent.traces import segment_numbers


@dataclass(slots=True)
class Segment:
    """One day's open segment and index (worker thread only)."""

    folder: Path
    n: int
    data: int
    index: int
    size: int
    """The segment's size after the last write (every writer's members included)."""
    checked: float

    def close(self) -> None:
        for fd in (self.data, self.index):
            with contextlib.suppress(OSError):
                os.close(fd)


def open_segment(
    segments: dict[str, Segment], calls_dir: Path, day: str, n: int | None, segment_bytes: int
) -> Segment:
    """Open the day's segment `n` (None: the newest there), or the first after it that is
    under `segment_bytes`, with its index; kept in `segments` (two days at most)."""
    folder = calls_dir / day
    folder.mkdir(parents=True, exist_ok=True)
    if n is None:
        n = max(segment_numbers(folder, "gz"), default=0)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    while True:
        data = os.open(folder / f"{n}.gz", flags, 0o600)
        size = os.lseek(data, 0, os.SEEK_END)
        if size < segment_bytes:
            break
        os.close(data)
        n += 1
    try:
        index = os.open(folder / f"{n}.idx", flags, 0o600)
    except OSError:
        os.close(data)
        raise
    while len(segments) >= 2:  # a held trace of yesterday, written after midnight
        forget(segments, min(segments))
    segment = Segment(folder, n, data, index, size, checked=time.monotonic())
    segments[day] = segment
    return segment


def forget(segments: dict[str, Segment], day: str) -> None:
    """Close the day's segment, if open (its files are not written to again)."""
    segment = segments.pop(day, None)
    if segment is not None:
        segment.close()


def close_all(segments: dict[str, Segment]) -> None:
    """Close every open segment (the next write opens them again)."""
    for day in list(segments):
        forget(segments, day)
