"""How long and how much of the trace files stay (`bot.agent.trace_writer`'s bounds): day
folders older than `keep_days` go whole; past the size bound, the oldest segments go (each
with its index) until 90 % of it is left. Run once a day and when a write passes the bound,
in the writer's thread; never on a reply's path otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from datetime import date, timedelta
from pathlib import Path

from bot.agent.traces import SEGMENT


def day_folders(directory: Path) -> list[Path]:
    """The day folders of `directory`, oldest first (ISO dates sort by time)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir())


def prune_days(directory: Path, *, keep_days: int, today: date) -> list[str]:
    """Remove the day folders before the last `keep_days` (today included); their names."""
    oldest = (today - timedelta(days=keep_days - 1)).isoformat()
    removed = []
    for day in day_folders(directory):
        if day.name < oldest:
            shutil.rmtree(day, ignore_errors=True)
            removed.append(day.name)
    return removed


def shrink(directory: Path, max_total_bytes: int) -> int:
    """Remove the oldest segments (whole, with their index) until the traces stay under
    90 % of `max_total_bytes`; the bytes left. The writer's files must be closed first."""
    target = max_total_bytes * 9 // 10
    total = folder_size(directory)
    for day in day_folders(directory):
        for unit in _oldest_first(day):
            if total <= target:
                break
            for path in unit:
                with contextlib.suppress(OSError):
                    size = path.stat().st_size
                    path.unlink()
                    total -= size
        with contextlib.suppress(OSError):
            day.rmdir()  # only when empty
        if total <= target:
            break
    return total


def _oldest_first(day: Path) -> list[list[Path]]:
    """What `shrink` removes together, oldest first: a per-call file of the old layout
    (by time), then each segment with its index (by number)."""
    segments: set[int] = set()
    others: list[Path] = []
    for path in day.iterdir():
        match = SEGMENT.fullmatch(path.name)
        if match is not None:
            segments.add(int(match.group(1)))
        else:
            others.append(path)
    units: list[list[Path]] = []
    with contextlib.suppress(OSError):
        others.sort(key=lambda p: p.stat().st_mtime)
    units.extend([p] for p in others)
    units.extend([day / f"{n}.idx", day / f"{n}.gz"] for n in sorted(segments))
    return units


def folder_size(directory: Path) -> int:
    """Bytes of every file in the day folders of `directory`."""
    total = 0
    try:
        days = list(os.scandir(directory))
    except FileNotFoundError:
        return 0
    for day in days:
        if not day.is_dir():
            continue
        with contextlib.suppress(OSError), os.scandir(day.path) as files:
            for file in files:
                with contextlib.suppress(OSError):
                    if file.is_file():
                        total += file.stat().st_size
    return total
