"""The usage ledger's files: one JSON line per model call in `<traces dir>/YYYY-MM-DD.jsonl`.

File layout. One file per calendar day in the bot's time zone (the day of `ts` there), one
line per call as `bot.agent.ledger.LedgerEntry` writes it, `\\n`-terminated, UTF-8.

Concurrency. `LedgerWriter.append` opens the day file with `O_APPEND` and writes the whole
encoded line with one `os.write`. On Linux a single append-mode write to a regular file is not
interleaved with another process's, so several bot processes may share one traces directory
without locks. Inside the bot, `LedgerWriter.append_async` hands lines to one writer thread at
a time, in call order, so the event loop never waits on the disk; `flush` waits for them at
shutdown. The traces of the same calls have their writer beside this one
(`bot.agent.trace_writer`); reading the files is `bot.agent.ledger_read`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from datetime import date, tzinfo
from pathlib import Path

from bot.agent.ledger import LedgerEntry

log = logging.getLogger("tgbot.ledger")


def ledger_file(traces_dir: Path, day: date) -> Path:
    return traces_dir / f"{day.isoformat()}.jsonl"


class LedgerWriter:
    """Appends entries to the day file of the bot's zone; safe across processes.

    `append` writes at once (blocking: tools and tests). `append_async` is the bot's way:
    the line joins a queue that one drain task empties through a worker thread, so the
    event loop never waits on the disk, lines land in call order, and at most one thread
    writes the ledger at a time. `flush` waits for the queue (shutdown).
    """

    def __init__(self, traces_dir: Path, zone: tzinfo) -> None:
        self._dir = traces_dir
        self._zone = zone
        self._queue: deque[tuple[LedgerEntry, asyncio.Future[None]]] = deque()
        self._drainer: asyncio.Task[None] | None = None

    def path_for(self, entry: LedgerEntry) -> Path:
        return ledger_file(self._dir, entry.ts.astimezone(self._zone).date())

    def append(self, entry: LedgerEntry) -> None:
        """Write one line with a single `O_APPEND` write (blocking; see `append_async`)."""
        _append_lines(self.path_for(entry), entry.to_json_line().encode())

    async def append_async(self, entry: LedgerEntry) -> None:
        """`append` off the event loop, after every line queued before it; raises its
        `OSError`. A caller cancelled while waiting does not withdraw the line."""
        loop = asyncio.get_running_loop()
        written: asyncio.Future[None] = loop.create_future()
        self._queue.append((entry, written))
        drainer = self._drainer
        if drainer is None or drainer.done() or drainer.get_loop() is not loop:
            self._drainer = loop.create_task(self._drain(), name="ledger-writer")
        await written

    async def flush(self) -> None:
        """Wait until every line handed to `append_async` is written (or failed)."""
        drainer = self._drainer
        while drainer is not None and not drainer.done():
            await asyncio.shield(drainer)
            drainer = self._drainer

    async def aclose(self) -> None:
        """Released on stop (`bot.app.serve`'s exit stack): every queued line is written."""
        await self.flush()

    async def _drain(self) -> None:
        while self._queue:
            batch = list(self._queue)
            self._queue.clear()
            failures = await asyncio.to_thread(self._write_batch, [e for e, _ in batch])
            for (_, written), failure in zip(batch, failures, strict=True):
                if written.done():  # its caller was cancelled; the line was still written
                    if failure is not None:
                        log.error("could not write a ledger line: %s", failure)
                elif failure is None:
                    written.set_result(None)
                else:
                    written.set_exception(failure)

    def _write_batch(self, entries: list[LedgerEntry]) -> list[OSError | None]:
        """Runs in the worker thread: the lines of each day file in one `O_APPEND` write
        (lines written whole, as one write is, never interleaved with another process's),
        so a batch costs an open, a write and a close per file, not per line. A failed
        write fails each of its entries."""
        by_file: dict[Path, list[int]] = {}
        for index, entry in enumerate(entries):
            by_file.setdefault(self.path_for(entry), []).append(index)
        failures: list[OSError | None] = [None] * len(entries)
        for path, indexes in by_file.items():
            try:
                _append_lines(path, b"".join(entries[i].to_json_line().encode() for i in indexes))
            except OSError as exc:
                for i in indexes:
                    failures[i] = exc
        return failures


def _append_lines(path: Path, data: bytes) -> None:
    """`data` (whole lines) at the end of `path` in one `O_APPEND` write; the directory is
    made when missing (the first line of a ledger)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            # A short write (disk full): end the broken line so the next entry stays
            # parseable; the reader counts the fragment as corrupt.
            os.write(fd, b"\n")
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)
