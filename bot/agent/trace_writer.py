"""Writes the traces of model calls (`bot.agent.traces`) into day segments, off the loop.

Writing is cheap: the segment and its index stay open between writes, and the traces of the
calls that end together go out in one `write` to each (`O_APPEND`: the workers of one host
may share the directory; each learns where its members landed from the file position after
its write). The member is written before its index line, so an index names only bytes that
were handed to the system. A segment is written to about `SEGMENT_BYTES` (a sixteenth of the
bound when that is smaller), then the next one starts.

When. A call that asked for tools is held in memory until the next call of its turn brings
their results, then written with them; one that did not is written at once. A held trace
is written anyway after `HOLD_SECONDS` (a slow tool; then written again, with its results,
when they come: the newer copy wins), when more than `OPEN_TURNS` turns wait, and by
`TraceWriter.flush`, which the bot awaits on a clean stop after its turns have finished:
nothing is lost then. A crash loses the held traces (calls whose tools were still running,
at most `HOLD_SECONDS` old) and those still queued for the writer thread (the calls of the
last moments); everything written before is in the files (no `fsync`: as the ledger, a
power cut may lose what the system had not yet stored).

Bounds. All traces together stay under `max_total_bytes` (compressed, indexes included):
when a write passes it, whole segments go, oldest first (the oldest day's first, a day's
per-call files of the old layout before its segments), until 90 % of the bound is left.
Days older than `keep_days` are pruned whole once a day (both: `bot.agent.trace_retention`).

`TraceWriter` is an `EventBus` subscriber beside metering (and beside the ledger's
`bot.agent.ledger_file.LedgerWriter`). The event loop only hands each call over (a queue
put); one writer thread builds, encodes, compresses and writes everything queued at that
moment as one batch, and ends after `IDLE_SECONDS` without work. The turn never waits for
the disk (unless `MAX_QUEUED` calls are waiting for it); a failed write is logged, never
raised into the turn. `drain` waits for what was handed over; `flush` also writes the held
traces and closes the files, and runs by itself when the event loop ends (`asyncio.run`
cancels the writer's guard task, which flushes before it goes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from bot.agent.events import EventBus, ModelCalled
from bot.agent.trace_held import Held, tool_results
from bot.agent.trace_retention import folder_size, prune_days, shrink
from bot.agent.trace_segments import Segment, close_all, forget, open_segment
from bot.agent.traces import trace_json, trace_member

log = logging.getLogger("tgbot.traces")

DEFAULT_MAX_TOTAL_BYTES = 256 * 1024 * 1024
"""All traces, compressed: 256 MiB (a busy bot writes a few MiB a day)."""
SEGMENT_BYTES = 4 * 1024 * 1024
"""A segment past this size is left for a new one (smaller under a small bound: a sixteenth
of it), so the bound drops the oldest traces in steps of a few percent at most."""
OPEN_TURNS = 1_000
"""Turns whose last call waits for its tool results (the next call of the turn)."""
HOLD_SECONDS = 60.0
"""How long a tool-calling call's trace waits for its results before it is written anyway."""
MAX_QUEUED = 1_000
"""Calls waiting for the worker thread past which a call's publisher waits for it."""
IDLE_SECONDS = 10.0
"""The worker thread ends after this long without a trace to write (and closes the files)."""
STALE_CHECK_SECONDS = 5.0
"""How often the open segments are checked for removal by another process's pruning."""


@dataclass(frozen=True, slots=True)
class _Call:
    """A call whose trace is to be written, with the results the next call brought."""

    call: ModelCalled
    tool_results: tuple[dict[str, Any], ...] = ()

    def trace(self) -> dict[str, Any]:
        trace = trace_json(self.call)
        trace["tool_results"] = list(self.tool_results)
        return trace


@dataclass(slots=True)
class _Job:
    """What one event hands to the worker thread."""

    calls: list[_Call]
    at: datetime | None
    done: concurrent.futures.Future[None] | None = None
    """Set once written (a flush, or a caller held back by a long queue)."""
    close: bool = False
    """Close the files once written (a flush)."""


class TraceWriter:
    """Keeps the trace of every model call published on the bus (see the module doc)."""

    def __init__(
        self,
        traces_dir: Path,
        *,
        keep_days: int = 7,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        segment_bytes: int | None = None,
        hold_seconds: float = HOLD_SECONDS,
    ) -> None:
        self.dir = traces_dir / "calls"
        self.keep_days = keep_days
        self.max_total_bytes = max_total_bytes
        self.segment_bytes = segment_bytes or max(1, min(SEGMENT_BYTES, max_total_bytes // 16))
        self.hold_seconds = hold_seconds
        self.stale_check_seconds = STALE_CHECK_SECONDS
        self._held: OrderedDict[str, Held] = OrderedDict()
        """Turn id → its last call, if it asked for tools."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._guardian: asyncio.Task[None] | None = None
        # the worker thread's
        self._pruned: date | None = None
        self._total: int | None = None
        self._segments: dict[str, Segment] = {}
        """Day (`YYYY-MM-DD`) → its open segment; two days at most."""

    def attach(self, bus: EventBus) -> TraceWriter:
        if self.keep_days > 0:
            bus.on(ModelCalled, self.on_model_call)
        return self

    async def on_model_call(self, call: ModelCalled) -> None:
        """Hand the call's trace (and the one it completes) to the worker thread; wait only
        when the worker is far behind."""
        if not call.call_id:
            return
        writes: list[_Call] = []
        held = self._held.pop(call.turn_id, None)
        if held is not None:
            results = () if call.request is None else tool_results(held.call, call.request)
            if results or not held.written:
                writes.append(_Call(held.call, results))
        response = call.response
        if response is not None and response.tool_calls:
            writes.extend(self._hold(call))
        else:
            writes.append(_Call(call))
        if writes:
            self._submit(_Job(calls=writes, at=call.at))
        guardian = self._guardian
        if (
            guardian is None
            or guardian.done()
            or guardian.get_loop() is not asyncio.get_running_loop()
        ):
            self._guardian = asyncio.get_running_loop().create_task(
                self._guard(), name="trace-writer-guard"
            )
        if self._jobs.qsize() > MAX_QUEUED:  # a slow disk: the turns wait, memory stays bounded
            await self.drain()

    async def _guard(self) -> None:
        """Waits for the end of the loop (`asyncio.run` cancels every task left), then
        flushes, so that the loop does not end before the traces handed over are written
        (a stop without `flush`: tests, tools)."""
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            await self.flush()
            raise

    async def drain(self) -> None:
        """Wait until every trace handed over so far is written (held ones stay held)."""
        await self._written(_Job(calls=[], at=None))

    async def flush(self) -> None:
        """Write every held trace, wait until everything handed over is written, and close
        the files (the next write opens them again). The bot awaits it on a clean stop,
        after its turns have finished; a failure is logged."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = [held for held in self._held.values() if not held.written]
        for held in due:
            held.written = True  # kept: results that still come are written with it
        at = max((held.call.at for held in due), default=None)
        await self._written(_Job(calls=[_Call(held.call) for held in due], at=at, close=True))

    async def aclose(self) -> None:
        """Released on stop (`bot.app.serve`'s exit stack), after the turns: `flush`."""
        await self.flush()

    def _hold(self, call: ModelCalled) -> list[_Call]:
        """Keep `call` until the next call of its turn; what must be written now instead
        (the oldest held, past `OPEN_TURNS`)."""
        self._held[call.turn_id] = Held(call=call, since=time.monotonic())
        evicted = []
        while len(self._held) > OPEN_TURNS:
            _, oldest = self._held.popitem(last=False)
            if not oldest.written:
                evicted.append(_Call(oldest.call))
        loop = asyncio.get_running_loop()
        if self._timer is None or self._timer_loop is not loop:
            self._timer = loop.call_later(self.hold_seconds, self._expire)
            self._timer_loop = loop
        return evicted

    def _expire(self) -> None:
        """Write the traces that waited `hold_seconds` (kept, so that their results are
        still written when they come); wake again for the next one."""
        self._timer = None
        now = time.monotonic()
        waiting = [held for held in self._held.values() if not held.written]
        due = [held for held in waiting if now - held.since >= self.hold_seconds]
        for held in due:
            held.written = True
        if due:
            at = max(held.call.at for held in due)
            self._submit(_Job(calls=[_Call(held.call) for held in due], at=at))
        if len(due) < len(waiting):
            loop = asyncio.get_running_loop()
            delay = waiting[len(due)].since + self.hold_seconds - now  # in the order held
            self._timer = loop.call_later(max(0.0, delay), self._expire)
            self._timer_loop = loop

    async def _written(self, job: _Job) -> None:
        """Hand `job` over and wait until it and everything before it is written."""
        job.done = concurrent.futures.Future()
        self._submit(job)
        await asyncio.wrap_future(job.done)

    def _submit(self, job: _Job) -> None:
        self._jobs.put(job)
        with self._worker_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="trace-writer", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        """The worker thread: the jobs queued together in one batch, in order; it ends after
        `IDLE_SECONDS` without any (and starts again with the next)."""
        while True:
            try:
                batch = [self._jobs.get(timeout=IDLE_SECONDS)]
            except queue.Empty:
                with self._worker_lock:
                    if self._jobs.qsize() == 0:
                        self._worker = None
                        close_all(self._segments)
                        return
                continue
            while True:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write_jobs(batch)
            except Exception:  # never lose the thread: the next traces may well be written
                log.exception("the trace writer failed")
            for job in batch:
                if job.done is not None:
                    with contextlib.suppress(concurrent.futures.InvalidStateError):
                        job.done.set_result(None)  # (unless its waiter was cancelled)

    def _write_jobs(self, batch: list[_Job]) -> None:
        close = any(job.close for job in batch)
        failures = self._write_batch([(job.calls, job.at) for job in batch], close=close)
        failed = [(job, failure) for job, failure in zip(batch, failures, strict=True) if failure]
        if failed:
            ids = [c.call.call_id for job, _ in failed for c in job.calls]
            more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
            log.error(
                "could not write the traces of calls %s%s: %s",
                ", ".join(ids[:5]),
                more,
                failed[0][1],
            )

    def _write_batch(
        self,
        batch: Sequence[tuple[Sequence[_Call | dict[str, Any]], datetime | None]],
        *,
        close: bool = False,
    ) -> list[Exception | None]:
        """Every trace of the batch, one write per file touched; what stopped each job's
        traces (in the worker thread, or the caller's: one writer at a time)."""
        failures: list[Exception | None] = [None] * len(batch)
        try:
            times = [at for traces, at in batch if traces and at is not None]
            if times:
                self._prepare(max(times))
            days: dict[str, list[tuple[int, str, bytes]]] = {}
            for job, (traces, _) in enumerate(batch):
                try:
                    encoded = [
                        trace_member(trace if isinstance(trace, dict) else trace.trace())
                        for trace in traces
                    ]
                except Exception as exc:  # a trace that cannot be encoded fails its call only
                    failures[job] = exc
                    continue
                for day, call_id, data in filter(None, encoded):
                    days.setdefault(day, []).append((job, call_id, data))
            for day, members in days.items():
                try:
                    self._append(day, [(call_id, data) for _, call_id, data in members])
                except Exception as exc:
                    for job, _, _ in members:
                        failures[job] = failures[job] or exc
            if self._total is not None and self._total > self.max_total_bytes:
                close_all(self._segments)  # the files are opened again at the next write
                self._total = shrink(self.dir, self.max_total_bytes)
        except Exception as exc:
            failures = [failure or exc for failure in failures]
        finally:
            if close:
                close_all(self._segments)
        return failures

    def _write_all(self, traces: list[dict[str, Any]], now: datetime) -> None:
        """Write `traces` now, in this thread (tests and tools, while no worker runs; the
        bot goes through the bus)."""
        (failure,) = self._write_batch([(traces, now)])
        if failure is not None:
            raise failure

    def _prepare(self, now: datetime) -> None:
        today = now.astimezone(UTC).date()
        if self._pruned != today:
            for removed in prune_days(self.dir, keep_days=self.keep_days, today=today):
                forget(self._segments, removed)  # its files are not written to again
            self._total = None
            self._pruned = today
        if self._total is None:
            self._total = folder_size(self.dir)

    def _append(self, day: str, members: list[tuple[str, bytes]]) -> None:
        """One write to the day's segment, then one to its index (the member first: an index
        line names only bytes handed to the system)."""
        segment = self._segment(day)
        blob = b"".join(data for _, data in members)
        if os.write(segment.data, blob) != len(blob):
            self._segments.pop(day, None)
            segment.close()
            raise OSError(f"a short write to {segment.folder / f'{segment.n}.gz'} (disk full?)")
        # O_APPEND: this writer's members end where the file position is now, whatever
        # another process appended before them
        end = os.lseek(segment.data, 0, os.SEEK_CUR)
        offset = end - len(blob)
        lines = []
        for call_id, data in members:
            lines.append(f"{call_id} {offset} {len(data)}\n")
            offset += len(data)
        index = "".join(lines).encode()
        if os.write(segment.index, index) != len(index):
            self._segments.pop(day, None)
            segment.close()
            raise OSError(f"a short write to {segment.folder / f'{segment.n}.idx'} (disk full?)")
        segment.size = end
        self._total = (self._total or 0) + len(blob) + len(index)

    def _segment(self, day: str) -> Segment:
        """The day's segment to append to: the open one, unless it is full or another
        process's pruning removed it."""
        segment = self._segments.get(day)
        if segment is not None:
            now = time.monotonic()
            if now - segment.checked >= self.stale_check_seconds:
                segment.checked = now
                if os.fstat(segment.data).st_nlink == 0 or os.fstat(segment.index).st_nlink == 0:
                    forget(self._segments, day)
                    segment = None
            if segment is not None and segment.size >= self.segment_bytes:
                following = segment.n + 1
                forget(self._segments, day)
                return open_segment(self._segments, self.dir, day, following, self.segment_bytes)
        return segment or open_segment(self._segments, self.dir, day, None, self.segment_bytes)
