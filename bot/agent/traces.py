"""Per-call traces: what each model call was sent and answered, kept a few days, compressed.

Layout. Per UTC day, append-only segments: `<traces dir>/calls/YYYY-MM-DD/<n>.gz`, each a
concatenation of gzip members (one per call, the call id as the member's file name), and
beside each its index `<n>.idx`, one line per member: `<call id> <offset> <length>`. A call
id starts with its UTC day (`20260101-<12 hex>`), so a trace is found from its id alone: read
that day's indexes (newest segment first, the last line of an id wins), seek, decompress one
member. A segment is written to about `SEGMENT_BYTES` (a sixteenth of the bound when that is
smaller), then the next one starts. Days written before segments hold one file per call,
`<call id>.json.gz`; readers take either (`read_trace`, `TraceReader`).

Writing is cheap: the segment and its index stay open between writes, and the traces of the
calls that end together go out in one `write` to each (`O_APPEND`: the workers of one host
may share the directory; each learns where its members landed from the file position after
its write). The member is written before its index line, so an index names only bytes that
were handed to the system. A torn tail (a crash or a full disk in the middle of a write)
costs the traces in it: readers skip a torn index line, and a member cut short reads as
damaged without touching the others.

Contents. The request exactly as sent: when the provider sent it over HTTP, the very bytes
of its JSON body (`wire_request`, in the shape `dialect` names: `openai` or `anthropic`),
spliced into the trace without decoding or encoding them again; otherwise (the scripted
model in-process, or a call that failed before an answer) the request as handed to the
provider (`request`: every message with its role, content, tool calls, tool call id and
images; the tool schemas; the cache plan; the parameters). Traces written before
`wire_request` existed hold `request` only; readers take either. Then the response (text,
tool calls, usage, finish reason), the tool results that the next call of the same turn
carried for this call's tool calls, and the call's figures (tokens, cache reads/writes,
latency, cost, error).

When. A call that asked for tools is held in memory until the next call of its turn brings
their results, then written with them; one that did not is written at once. A held trace
is written anyway after `HOLD_SECONDS` (a slow tool; then written again, with its results,
when they come: the newer copy wins), when more than `OPEN_TURNS` turns wait, and by
`TraceWriter.flush`, which the bot awaits on a clean stop after its turns have finished:
nothing is lost then. A crash loses the held traces (calls whose tools were still running,
at most `HOLD_SECONDS` old) and those still queued for the writer thread (the calls of the
last moments); everything written before is in the files (no `fsync`: as the ledger, a
power cut may lose what the system had not yet stored).

Bounds. One trace holds at most `MAX_TRACE_CHARS` characters of JSON before compression:
a larger one has each long string cut (`truncated` says so). All traces together stay
under `max_total_bytes` (compressed, indexes included): when a write passes it, whole
segments go, oldest first (the oldest day's first, a day's per-call files of the old
layout before its segments), until 90 % of the bound is left. Days older than `keep_days`
are pruned whole once a day.

`TraceWriter` is an `EventBus` subscriber beside metering. The event loop only hands each
call over (a queue put); one writer thread builds, encodes, compresses (gzip level 1:
traces are written on every call and read rarely) and writes everything queued at that
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
import dataclasses
import gzip
import json
import logging
import os
import queue
import random
import re
import shutil
import struct
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.agent.events import EventBus, ModelCalled
from bot.agent.ledger import describe_error
from bot.domain.messages import ImagePart
from bot.ports import LLMRequest, LLMResponse, SentBody

log = logging.getLogger("tgbot.traces")

MAX_TRACE_CHARS = 1_000_000
"""One call's JSON before compression; past it every string is cut to `CUT_STRING_CHARS`."""
CUT_STRING_CHARS = 4_000
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

CALL_ID = re.compile(r"(\d{8})-[0-9a-f]{12}")
_INDEX_TAIL = re.compile(rb"(\d{1,15}) (\d{1,15})\n")
"""The rest of an index line after `<call id> `."""
_SEGMENT = re.compile(r"(\d{1,9})\.(gz|idx)")
_LEGACY_SUFFIX = ".json.gz"


def new_call_id(at: datetime) -> str:
    """A fresh id for a call made at `at`: its UTC day, then 48 random bits (from the
    process's seeded generator, as turn ids: see `bot.agent.runtime.new_turn_id`; the
    dashboard guards its pages with its token, not with the ids: unique, not secret)."""
    return f"{at.astimezone(UTC):%Y%m%d}-{random.getrandbits(48):012x}"


def call_day(call_id: str) -> date | None:
    """The UTC day a call id names, or `None` for a string that is not a call id."""
    match = CALL_ID.fullmatch(call_id)
    if match is None:
        return None
    try:
        return datetime.strptime(match.group(1), "%Y%m%d").date()
    except ValueError:
        return None


def trace_path(traces_dir: Path, call_id: str) -> Path | None:
    """The file of one call in the layout before segments (`None`: not a call id). Still
    read; no longer written."""
    day = call_day(call_id)
    if day is None:
        return None
    return traces_dir / "calls" / day.isoformat() / f"{call_id}{_LEGACY_SUFFIX}"


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
            data = (folder / f"{call_id}{_LEGACY_SUFFIX}").read_bytes()
        except FileNotFoundError:
            return None
        return _decode(data, call_id)

    def _day(self, day: date) -> list[tuple[int, bytes]]:
        """The day's indexes, newest segment first."""
        indexes = self._indexes.get(day)
        if indexes is None:
            indexes = []
            for n in sorted(_segment_numbers(self.dir / day.isoformat(), "idx"), reverse=True):
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


def _segment_numbers(folder: Path, suffix: str) -> list[int]:
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    numbers = []
    for name in names:
        match = _SEGMENT.fullmatch(name)
        if match is not None and match.group(2) == suffix:
            numbers.append(int(match.group(1)))
    return numbers


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` for JSON: every field, nested, with lists for tuples (as the file
    reads back) and the leaves shared instead of deep-copied (a request's tool schemas and
    history made that copy the bulk of writing a trace)."""
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def request_json(request: LLMRequest) -> dict[str, Any]:
    data: dict[str, Any] = _plain(request)
    for message in data["messages"]:
        message.pop("tokens", None)  # our estimate, not part of what is sent
    return data


def response_json(response: LLMResponse) -> dict[str, Any]:
    data: dict[str, Any] = _plain(dataclasses.replace(response, sent=None))
    data.pop("sent", None)  # the request's bytes: kept once, as `wire_request`
    return data


def trace_json(call: ModelCalled) -> dict[str, Any]:
    """The trace of one call, as stored."""
    usage = call.usage
    sent = call.response.sent if call.response is not None else None
    request: dict[str, Any] | None = None
    if sent is None and call.request is not None:
        request = request_json(call.request)
    return {
        "call_id": call.call_id,
        "ts": call.at.astimezone(UTC).isoformat(timespec="milliseconds"),
        "session": call.session.id,
        "chat": call.session.key.chat_id,
        "thread": call.session.key.thread_id,
        "scene": call.session.scene,
        "turn_id": call.turn_id,
        "iteration": call.iteration,
        "purpose": call.purpose,
        "final": call.final,
        "provider": call.route.profile,
        "model": call.route.model,
        "latency_ms": call.latency_ms,
        "error": None if call.error is None else describe_error(call.error),
        # no price configured: the cost is unknown (`null`), not zero (as the ledger line)
        "cost": call.route.prices.cost(usage)
        if usage is not None and call.route.prices.configured
        else None,
        "estimated_input": call.fixed_tokens + call.tokens.messages,
        "request": request,
        "response": None if call.response is None else response_json(call.response),
        "tool_results": [],
        "truncated": False,
        **({} if sent is None else _sent_fields(sent, call.request)),
    }


def _sent_fields(sent: SentBody, request: LLMRequest | None) -> dict[str, Any]:
    """The body as sent (bytes, spliced in by `encode_trace`) and the request's cache plan,
    which the body shows only as markers."""
    plan = None if request is None or request.cache_plan is None else request.cache_plan
    # what the body cannot say of its images (whose they are, their size and our estimate),
    # in the order they appear in it
    images = [] if request is None else [image for m in request.messages for image in m.images]
    return {
        "dialect": sent.dialect,
        "cache_plan": None if plan is None else dataclasses.asdict(plan),
        **({"image_facts": [_image_facts(image) for image in images]} if images else {}),
        "wire_request": sent.body,
    }


def _image_facts(image: ImagePart) -> dict[str, Any]:
    return {
        "label": image.label,
        "width": image.width,
        "height": image.height,
        "tokens": image.tokens,
    }


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > CUT_STRING_CHARS:
        return value[:CUT_STRING_CHARS] + f"… [{len(value) - CUT_STRING_CHARS} chars cut]"
    if isinstance(value, list):
        return [_cut(item) for item in value]
    if isinstance(value, dict):
        return {key: _cut(item) for key, item in value.items()}
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_trace(trace: dict[str, Any]) -> bytes:
    """One gzip member of a trace (its call id as the member's file name), cut to
    `MAX_TRACE_CHARS` of JSON first. A `wire_request` given as bytes (a JSON body as sent)
    is spliced in as it is."""
    call_id = trace.get("call_id")
    name = call_id.encode("latin-1", "replace") if isinstance(call_id, str) else b""
    wire = trace.get("wire_request")
    if isinstance(wire, bytes):
        rest = {key: value for key, value in trace.items() if key != "wire_request"}
        head = _dumps(rest).encode()
        size = len(head) + len(wire)  # bytes: never fewer than the characters
        if size > MAX_TRACE_CHARS:
            size = len(head.decode()) + len(wire.decode("utf-8", "replace"))
        if size <= MAX_TRACE_CHARS:
            return _gzip_member(head[:-1] + b',"wire_request":' + wire + b"}", name)
        trace = {**rest, "wire_request": json.loads(wire)}  # too long: cut as below
    text = _dumps(trace)
    if len(text) > MAX_TRACE_CHARS:
        trace = {**_cut(trace), "truncated": True}
        text = _dumps(trace)
        if len(text) > MAX_TRACE_CHARS:  # a great many short strings: keep the figures
            trace = {**trace, "request": None, "response": None, "tool_results": []}
            trace.pop("wire_request", None)
            text = _dumps(trace)
    return _gzip_member(text.encode(), name)


def _gzip_member(data: bytes, name: bytes) -> bytes:
    """`gzip.compress(data, 1)` with `name` in the header (RFC 1952: FNAME, no time, fastest
    compression, unknown system)."""
    flags = b"\x08" if name else b"\x00"
    header = b"\x1f\x8b\x08" + flags + b"\x00\x00\x00\x00\x04\xff"
    if name:
        header += name.replace(b"\x00", b"?") + b"\x00"
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return header + zlib.compress(data, 1, wbits=-15) + trailer


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
class _Held:
    """A tool-calling call, waiting for the next call of its turn."""

    call: ModelCalled
    since: float
    """`time.monotonic()` when it began to wait."""
    written: bool = False
    """Written already, without its results (it waited `HOLD_SECONDS`, or a flush came)."""


@dataclass(slots=True)
class _Job:
    """What one event hands to the worker thread."""

    calls: list[_Call]
    at: datetime | None
    done: concurrent.futures.Future[None] | None = None
    """Set once written (a flush, or a caller held back by a long queue)."""
    close: bool = False
    """Close the files once written (a flush)."""


@dataclass(slots=True)
class _Segment:
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
        self._held: OrderedDict[str, _Held] = OrderedDict()
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
        self._segments: dict[str, _Segment] = {}
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
            results = () if call.request is None else _tool_results(held.call, call.request)
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

    def _hold(self, call: ModelCalled) -> list[_Call]:
        """Keep `call` until the next call of its turn; what must be written now instead
        (the oldest held, past `OPEN_TURNS`)."""
        self._held[call.turn_id] = _Held(call=call, since=time.monotonic())
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
                        self._close_all()
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
                        _member(trace if isinstance(trace, dict) else trace.trace())
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
                self._shrink()
        except Exception as exc:
            failures = [failure or exc for failure in failures]
        finally:
            if close:
                self._close_all()
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
            self._prune_old(today)
            self._pruned = today
        if self._total is None:
            self._total = _size(self.dir)

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

    def _segment(self, day: str) -> _Segment:
        """The day's segment to append to: the open one, unless it is full or another
        process's pruning removed it."""
        segment = self._segments.get(day)
        if segment is not None:
            now = time.monotonic()
            if now - segment.checked >= self.stale_check_seconds:
                segment.checked = now
                if os.fstat(segment.data).st_nlink == 0 or os.fstat(segment.index).st_nlink == 0:
                    self._forget(day)
                    segment = None
            if segment is not None and segment.size >= self.segment_bytes:
                following = segment.n + 1
                self._forget(day)
                return self._open(day, following)
        return segment or self._open(day, None)

    def _open(self, day: str, n: int | None) -> _Segment:
        folder = self.dir / day
        folder.mkdir(parents=True, exist_ok=True)
        if n is None:
            n = max(_segment_numbers(folder, "gz"), default=0)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        while True:
            data = os.open(folder / f"{n}.gz", flags, 0o600)
            size = os.lseek(data, 0, os.SEEK_END)
            if size < self.segment_bytes:
                break
            os.close(data)
            n += 1
        try:
            index = os.open(folder / f"{n}.idx", flags, 0o600)
        except OSError:
            os.close(data)
            raise
        while len(self._segments) >= 2:  # a held trace of yesterday, written after midnight
            self._forget(min(self._segments))
        segment = _Segment(folder, n, data, index, size, checked=time.monotonic())
        self._segments[day] = segment
        return segment

    def _forget(self, day: str) -> None:
        segment = self._segments.pop(day, None)
        if segment is not None:
            segment.close()

    def _close_all(self) -> None:
        for day in list(self._segments):
            self._forget(day)

    def _days(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if p.is_dir())

    def _prune_old(self, today: date) -> None:
        oldest = (today - timedelta(days=self.keep_days - 1)).isoformat()
        for day in self._days():
            if day.name < oldest:
                self._forget(day.name)
                shutil.rmtree(day, ignore_errors=True)
        self._total = None

    def _shrink(self) -> None:
        """Remove the oldest segments (whole, with their index) until the traces stay under
        90 % of the bound; the files are opened again at the next write."""
        self._close_all()
        target = self.max_total_bytes * 9 // 10
        total = _size(self.dir)
        for day in self._days():
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
        self._total = total


def _member(trace: dict[str, Any]) -> tuple[str, str, bytes] | None:
    """(day, call id, gzip member) of a trace; `None` for one without a call id."""
    call_id = str(trace.get("call_id"))
    day = call_day(call_id)
    if day is None:
        return None
    return day.isoformat(), call_id, encode_trace(trace)


def _oldest_first(day: Path) -> list[list[Path]]:
    """What `_shrink` removes together, oldest first: a per-call file of the old layout
    (by time), then each segment with its index (by number)."""
    segments: set[int] = set()
    others: list[Path] = []
    for path in day.iterdir():
        match = _SEGMENT.fullmatch(path.name)
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


def _size(directory: Path) -> int:
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


def _tool_results(previous: ModelCalled, request: LLMRequest) -> tuple[dict[str, Any], ...]:
    """The tool messages of `request` that answer the tool calls of the previous call."""
    response = previous.response
    ids = {call.id for call in response.tool_calls} if response is not None else set()
    return tuple(
        {
            "tool_call_id": message.tool_call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
        for message in request.messages
        if message.role == "tool" and message.tool_call_id in ids
    )
