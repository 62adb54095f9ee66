"""The usage ledger: one JSON line per model call in `<traces dir>/YYYY-MM-DD.jsonl`.

File layout. One file per calendar day in the bot's time zone (the day of `ts` there), one
JSON object per line, `\\n`-terminated, UTF-8. Every key of `LedgerEntry` is written (`null`
where unknown); `from_json` accepts lines with missing optional keys, so older or hand-made
lines stay readable.

Concurrency. `LedgerWriter.append` opens the day file with `O_APPEND` and writes the whole
encoded line with one `os.write`. On Linux a single append-mode write to a regular file is not
interleaved with another process's, so several bot processes may share one traces directory
without locks. A line is capped at `MAX_LINE_BYTES` (the error text is shortened first).
Inside the bot, `LedgerWriter.append_async` hands lines to one writer thread at a time, in
call order, so the event loop never waits on the disk; `flush` waits for them at shutdown.

Reading. `LedgerEntry.from_json` is the one decoder of a line; `read_entries` never fails
on a bad line: a line that does not parse is counted as `corrupt`, a last line without its
newline that does not parse (a crash mid-write) as `partial`, and both are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import operator
import os
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Literal

from bot.redact import scrub

log = logging.getLogger("tgbot.ledger")

Purpose = Literal[
    "turn", "final_summary", "recovery_retry", "compaction", "transcription", "judge", "catchup"
]
PURPOSES: tuple[Purpose, ...] = (
    "turn", "final_summary", "recovery_retry", "compaction", "transcription", "judge", "catchup"
)  # fmt: skip
Stop = Literal["end", "length", "refusal", "tool_calls", "context"]
STOPS: tuple[Stop, ...] = ("end", "length", "refusal", "tool_calls", "context")

MAX_LINE_BYTES = 4096
"""Upper bound of one encoded line; keeps each append a single small write."""

MAX_ERROR_CHARS = 300

_BAD_LINE = (ValueError, TypeError, KeyError, AttributeError)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrimInfo:
    """What a history trim did before this call (see `HistoryTrimmed`)."""

    reason: str
    dropped_turns: int
    dropped_messages: int
    kept_turns: int
    tokens_before: int
    tokens_after: int
    budget: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One model call.

    `input_tokens` / `cached_tokens` / `cache_write_tokens` / `output_tokens` are what the
    provider reported (`None` when it did not). `input_tokens` is the whole billed input:
    cache reads (`cached_tokens`) and cache writes (`cache_write_tokens`) are parts of it;
    lines from before writes were read have no `cache_write_tokens` and read as 0 writes.
    `cost` is the call's whole cost at the route's prices, `cache_write_cost` the part of it
    the cache writes took (both `None` without a report). `input_truncated_by_provider`
    marks a call whose reported input was far below what we sent (an Ollama-style silent
    truncation, see `bot.agent.metering`). `est_*` is our own estimate of the
    input, split into fixed (system prompt + tool schemas), history (window messages),
    current (per-turn context + current message) and images; `est_corrected` is the total as
    budgets and the capacity check saw it (scaled by the route's learned correction, or the
    exact count of the route's tokenizer file; `None` on lines from before it existed).
    `trims` are every history trim made before this call since the previous one, in order
    (a window move and a proactive trim of one call are two); `trim` is the last. `error` is
    the error class and a short message, passed through `describe_error` so no secret lands
    on disk. `stop` is why the model stopped (`end`, `length`, `refusal`, `tool_calls`,
    `context`; `None` when the call got no answer or the provider did not say);
    `reasoning_tokens` the part of `output_tokens` spent thinking; `cache_write_1h_tokens` the
    part of `cache_write_tokens` written for 1 hour (priced apart, see `Prices`).
    """

    ts: datetime
    session: int
    chat: int
    thread: int = 0
    scene: str
    turn_id: str
    iteration: int = 1
    purpose: Purpose = "turn"
    provider: str
    model: str
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    est_fixed: int = 0
    est_history: int = 0
    est_current: int = 0
    est_images: int = 0
    est_corrected: int | None = None
    trims: tuple[TrimInfo, ...] = ()
    latency_ms: int = 0
    error: str | None = None
    hit_iteration_cap: bool = False
    cost: float | None = None
    tool_calls: int = 0
    cache_write_tokens: int | None = None
    cache_write_cost: float | None = None
    input_truncated_by_provider: bool = False
    call_id: str = ""
    """Names the call's trace (`bot.agent.traces`); empty on lines from before traces."""
    stop: Stop | None = None
    reasoning_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    mcp_tool_calls: int = 0
    """How many of `tool_calls` name a tool of an MCP server (`<server>__<tool>`)."""
    refused: str | None = None
    """`budget`: the call was not made, a spend limit was reached (`bot.agent.spend`)."""
    images: int = 0
    """Images the call sent (the current turn's, and tool results' `view_image`); their
    tokens are `est_images`."""
    route: str = ""
    """The profile that took the call (empty on lines from before fallback chains)."""
    fallback_from: str | None = None
    """The session's own profile, when the call went to one of its fallbacks."""

    def __post_init__(self) -> None:
        if self.ts.tzinfo is None or self.ts.utcoffset() is None:
            raise ValueError("LedgerEntry.ts must be timezone-aware")

    @property
    def trim(self) -> TrimInfo | None:
        """The last trim before this call (what older lines carried as `trim`)."""
        return self.trims[-1] if self.trims else None

    @property
    def est_total(self) -> int:
        return self.est_fixed + self.est_history + self.est_current + self.est_images

    def to_dict(self) -> dict[str, Any]:
        trims = [trim_to_json(trim) for trim in self.trims]
        return {
            "ts": self.ts.astimezone(UTC).isoformat(timespec="milliseconds"),
            "session": self.session,
            "chat": self.chat,
            "thread": self.thread,
            "scene": self.scene,
            "turn_id": self.turn_id,
            "iteration": self.iteration,
            "purpose": self.purpose,
            "provider": self.provider,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "est_fixed": self.est_fixed,
            "est_history": self.est_history,
            "est_current": self.est_current,
            "est_images": self.est_images,
            "est_corrected": self.est_corrected,
            "trims": trims,
            "latency_ms": self.latency_ms,
            "error": self.error,
            "hit_iteration_cap": self.hit_iteration_cap,
            "cost": self.cost,
            "tool_calls": self.tool_calls,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_write_cost": self.cache_write_cost,
            "input_truncated_by_provider": self.input_truncated_by_provider,
            "call_id": self.call_id,
            "stop": self.stop,
            "reasoning_tokens": self.reasoning_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "mcp_tool_calls": self.mcp_tool_calls,
            "refused": self.refused,
            "images": self.images,
            "route": self.route,
            "fallback_from": self.fallback_from,
        }

    def to_json_line(self) -> str:
        """The entry as one JSON line, newline included, at most `MAX_LINE_BYTES` encoded."""
        line = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        if len(line.encode()) <= MAX_LINE_BYTES:
            return line
        shorter = replace(
            self,
            error=None if self.error is None else self.error[:80],
            scene=self.scene[:40],
            turn_id=self.turn_id[:80],
            provider=self.provider[:80],
            model=self.model[:120],
        )
        return json.dumps(shorter.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LedgerEntry:
        """Parse one decoded line; only `ts` is required. Raises `ValueError` on bad shapes.

        The one decoder of the format; the usage report reads a month of lines through it,
        so a line as `LedgerWriter` writes it (every key, plain JSON types) takes a quick
        path: one lookup for all keys, exact-type checks, and the values go straight into
        the slots. Anything else takes the tolerant path (`_from_partial`); both agree.
        """
        try:
            values = _every_field(data)
        except KeyError:
            return _from_partial(data)
        # fmt: off
        (ts, session, chat, thread, scene, turn_id, iteration, purpose, provider, model,
         input_tokens, cached_tokens, output_tokens, est_fixed, est_history, est_current,
         est_images, est_corrected, trims, latency_ms, error, hit_iteration_cap, cost,
         tool_calls, cache_write_tokens, cache_write_cost, truncated, call_id, stop,
         reasoning_tokens, cache_write_1h_tokens, mcp_tool_calls, refused, images,
         route, fallback_from) = values
        if not (
            type(ts) is str and type(session) is int and type(chat) is int
            and type(thread) is int and type(scene) is str and type(turn_id) is str
            and type(iteration) is int and purpose in PURPOSES and type(provider) is str
            and type(model) is str and (type(input_tokens) is int or input_tokens is None)
            and (type(cached_tokens) is int or cached_tokens is None)
            and (type(output_tokens) is int or output_tokens is None)
            and type(est_fixed) is int and type(est_history) is int
            and type(est_current) is int and type(est_images) is int
            and (type(est_corrected) is int or est_corrected is None)
            and type(latency_ms) is int and (type(error) is str or error is None)
            and type(hit_iteration_cap) is bool and (type(cost) is float or cost is None)
            and type(tool_calls) is int and type(trims) is list
            and (type(cache_write_tokens) is int or cache_write_tokens is None)
            and (type(cache_write_cost) is float or cache_write_cost is None)
            and type(truncated) is bool and type(call_id) is str
            and (stop is None or stop in STOPS)
            and (type(reasoning_tokens) is int or reasoning_tokens is None)
            and (type(cache_write_1h_tokens) is int or cache_write_1h_tokens is None)
            and type(mcp_tool_calls) is int
            and (type(refused) is str or refused is None)
            and type(images) is int and type(route) is str
            and (type(fallback_from) is str or fallback_from is None)
        ):
            return _from_partial(data)
        parsed = datetime.fromisoformat(ts)
        if parsed.tzinfo is None:
            raise ValueError("ledger line without a valid ts")
        return _assemble((
            parsed, session, chat, thread, scene, turn_id, iteration, purpose, provider, model,
            input_tokens, cached_tokens, output_tokens, est_fixed, est_history, est_current,
            est_images, est_corrected, tuple(map(_trim_from_json, trims)),
            latency_ms, error, hit_iteration_cap, cost, tool_calls,
            cache_write_tokens, cache_write_cost, truncated, call_id, stop,
            reasoning_tokens, cache_write_1h_tokens, mcp_tool_calls, refused, images,
            route, fallback_from,
        ))
        # fmt: on


def _from_partial(data: Mapping[str, Any]) -> LedgerEntry:
    """The tolerant path of `LedgerEntry.from_json`: missing keys take their defaults,
    numbers of the other JSON kind convert, `null` strings read as empty."""
    get = data.get
    ts = _parse_ts(data["ts"]) if "ts" in data else None
    if ts is None:
        raise ValueError("ledger line without a valid ts")
    purpose = get("purpose") or "turn"
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}")
    trims = get("trims")
    if trims is None:  # an older line kept only the last trim, as `trim`
        trim = get("trim")
        trims = [] if trim is None else [trim]
    if not isinstance(trims, list):
        raise ValueError("trims must be a list")
    error = get("error")
    input_tokens = _opt_int(get("input_tokens"))
    writes = _opt_int(get("cache_write_tokens"))
    if writes is None and input_tokens is not None:
        writes = 0  # a line from before writes were read: the provider reported none
    stop = get("stop")
    if stop is not None and stop not in STOPS:
        raise ValueError(f"unknown stop {stop!r}")
    return _assemble(
        (  # in the order of `_FIELDS`
            ts,
            _int(get("session")),
            _int(get("chat")),
            _int(get("thread")),
            _str(get("scene")),
            _str(get("turn_id")),
            _int(get("iteration"), 1),
            purpose,
            _str(get("provider")),
            _str(get("model")),
            input_tokens,
            _opt_int(get("cached_tokens")),
            _opt_int(get("output_tokens")),
            _int(get("est_fixed")),
            _int(get("est_history")),
            _int(get("est_current")),
            _int(get("est_images")),
            _opt_int(get("est_corrected")),
            tuple(map(_trim_from_json, trims)),
            _int(get("latency_ms")),
            None if error is None else str(error),
            bool(get("hit_iteration_cap", False)),
            _opt_float(get("cost")),
            _int(get("tool_calls")),
            writes,
            _opt_float(get("cache_write_cost")),
            bool(get("input_truncated_by_provider", False)),
            _str(get("call_id")),
            stop,
            _opt_int(get("reasoning_tokens")),
            _opt_int(get("cache_write_1h_tokens")),
            _int(get("mcp_tool_calls")),
            None if get("refused") is None else _str(get("refused")),
            _int(get("images")),
            _str(get("route")),
            None if get("fallback_from") is None else _str(get("fallback_from")),
        )
    )


_FIELDS = tuple(f.name for f in fields(LedgerEntry))
"""The field order `from_json` passes values to `_assemble` in."""
_every_field = operator.itemgetter(*_FIELDS)
_SLOT_SETTERS = tuple(getattr(LedgerEntry, name).__set__ for name in _FIELDS)
_new_entry = object.__new__


def _assemble(values: tuple[Any, ...]) -> LedgerEntry:
    """A `LedgerEntry` from already checked values, set slot by slot.

    Half the cost of `LedgerEntry(**fields)` (keyword binding and the frozen `__setattr__`
    calls dominate it); only `from_json` uses it, after checking what `__post_init__` would.
    """
    entry: LedgerEntry = _new_entry(LedgerEntry)
    for set_slot, value in zip(_SLOT_SETTERS, values, strict=True):
        set_slot(entry, value)
    return entry


def describe_error(exc: BaseException) -> str:
    """`ClassName: short message` for the ledger, with token-like substrings redacted."""
    text = scrub(" ".join(str(exc).split()))
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


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
        decode = LedgerEntry.from_json
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
        decode = LedgerEntry.from_json
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


def _parse_ts(value: Any) -> datetime | None:
    if type(value) is not str:
        return None
    ts = datetime.fromisoformat(value)
    return ts if ts.tzinfo is not None else None


# The converters test the exact JSON type first: this runs for every field of every line.


def _int(value: Any, default: int = 0) -> int:
    if type(value) is int:
        return value
    if value is None:
        return default
    if type(value) is float:
        return int(value)
    raise ValueError(f"expected a number, got {value!r}")


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


def trim_to_json(trim: TrimInfo) -> dict[str, Any]:
    """A trim as the ledger line (and the dashboard's live feed) writes it."""
    return {
        "reason": trim.reason,
        "dropped_turns": trim.dropped_turns,
        "dropped_messages": trim.dropped_messages,
        "kept_turns": trim.kept_turns,
        "tokens_before": trim.tokens_before,
        "tokens_after": trim.tokens_after,
        "budget": trim.budget,
    }


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
