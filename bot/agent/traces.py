"""Per-call traces: what each model call was sent and answered, kept a few days, compressed.

Layout. `<traces dir>/calls/YYYY-MM-DD/<call_id>.json.gz`, one gzip-compressed JSON object
per call. A call id starts with its UTC day (`20260101-<12 hex>`), so a trace is found from
its id alone with one `open` (no index), and pruning removes whole day directories.

Contents. The request exactly as sent: when the provider sent it over HTTP, the very bytes
of its JSON body (`wire_request`, in the shape `dialect` names: `openai` or `anthropic`),
spliced into the file without decoding or encoding them again; otherwise (the scripted
model in-process, or a call that failed before an answer) the request as handed to the
provider (`request`: every message with its role, content, tool calls, tool call id and
images; the tool schemas; the cache plan; the parameters). Files written before
`wire_request` existed hold `request` only; readers take either. Then the response (text,
tool calls, usage, finish reason), the tool results that the next call of the same turn
carried for this call's tool calls, and the call's figures (tokens, cache reads/writes,
latency, cost, error).

Bounds. One trace holds at most `MAX_TRACE_CHARS` characters of JSON before compression:
a larger one has each long string cut (`truncated` says so). All traces together stay
under `max_total_bytes` (compressed): when a write passes it, the oldest day directories
go, then today's oldest files. Days older than `keep_days` are pruned once a day.

`TraceWriter` is an `EventBus` subscriber beside metering; files are encoded, compressed
(gzip level 1: traces are written on every call and read rarely) and written in a worker
thread, the traces of calls that end together in one trip there, and a failed write is
logged, never raised into the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import json
import logging
import random
import re
import shutil
from collections import OrderedDict, deque
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
OPEN_TURNS = 1_000
"""Turns whose last call waits for its tool results (the next call of the turn)."""

CALL_ID = re.compile(r"(\d{8})-[0-9a-f]{12}")


def new_call_id(at: datetime) -> str:
    """A fresh id for a call made at `at`: its UTC day, then 48 random bits (from the
    process's seeded generator, as turn ids: see `bot.agent.runtime.new_turn_id`)."""
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
    day = call_day(call_id)
    if day is None:
        return None
    return traces_dir / "calls" / day.isoformat() / f"{call_id}.json.gz"


def read_trace(traces_dir: Path, call_id: str) -> dict[str, Any] | None:
    """The stored trace of `call_id`; `None` when there is none (pruned, or never kept).
    Raises `ValueError` for a damaged file."""
    path = trace_path(traces_dir, call_id)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        trace = json.loads(gzip.decompress(data))
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise ValueError(f"the trace of {call_id} is damaged: {exc}") from exc
    if not isinstance(trace, dict):
        raise ValueError(f"the trace of {call_id} is not an object")
    return trace


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
    """The compressed file of a trace, cut to `MAX_TRACE_CHARS` of JSON first. A
    `wire_request` given as bytes (a JSON body as sent) is spliced in as it is."""
    wire = trace.get("wire_request")
    if isinstance(wire, bytes):
        rest = {key: value for key, value in trace.items() if key != "wire_request"}
        head = _dumps(rest).encode()
        size = len(head) + len(wire)  # bytes: never fewer than the characters
        if size > MAX_TRACE_CHARS:
            size = len(head.decode()) + len(wire.decode("utf-8", "replace"))
        if size <= MAX_TRACE_CHARS:
            return gzip.compress(head[:-1] + b',"wire_request":' + wire + b"}", compresslevel=1)
        trace = {**rest, "wire_request": json.loads(wire)}  # too long: cut as below
    text = _dumps(trace)
    if len(text) > MAX_TRACE_CHARS:
        trace = {**_cut(trace), "truncated": True}
        text = _dumps(trace)
        if len(text) > MAX_TRACE_CHARS:  # a great many short strings: keep the figures
            trace = {**trace, "request": None, "response": None, "tool_results": []}
            trace.pop("wire_request", None)
            text = _dumps(trace)
    return gzip.compress(text.encode(), compresslevel=1)


class TraceWriter:
    """Keeps the trace of every model call published on the bus (see the module doc)."""

    def __init__(
        self,
        traces_dir: Path,
        *,
        keep_days: int = 7,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    ) -> None:
        self.dir = traces_dir / "calls"
        self.keep_days = keep_days
        self.max_total_bytes = max_total_bytes
        self._open: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Turn id → the trace of its last call, until the next call brings its results."""
        self._pruned: date | None = None
        self._total: int | None = None
        self._queue: deque[tuple[list[dict[str, Any]], datetime, asyncio.Future[None]]] = deque()
        """Traces waiting for the worker thread, with the call's time and its waiter."""
        self._drainer: asyncio.Task[None] | None = None

    def attach(self, bus: EventBus) -> TraceWriter:
        if self.keep_days > 0:
            bus.on(ModelCalled, self.on_model_call)
        return self

    async def on_model_call(self, call: ModelCalled) -> None:
        if not call.call_id:
            return
        trace = trace_json(call)
        writes = [trace]
        previous = self._open.pop(call.turn_id, None)
        if previous is not None and call.request is not None:
            results = _tool_results(previous, call.request)
            if results:
                previous["tool_results"] = results
                writes.insert(0, previous)
        response = call.response
        if response is not None and response.tool_calls:
            self._open[call.turn_id] = trace
            while len(self._open) > OPEN_TURNS:
                self._open.popitem(last=False)
        loop = asyncio.get_running_loop()
        written: asyncio.Future[None] = loop.create_future()
        self._queue.append((writes, call.at, written))
        drainer = self._drainer
        if drainer is None or drainer.done() or drainer.get_loop() is not loop:
            self._drainer = loop.create_task(self._drain(), name="trace-writer")
        try:
            await written  # cancelled: the trace is still written
        except OSError:
            log.exception("could not write the trace of call %s", call.call_id)

    async def _drain(self) -> None:
        """Write the queued traces in order, those queued together in one trip to a worker
        thread (one thread writes at a time, as the ledger's)."""
        while self._queue:
            batch = list(self._queue)
            self._queue.clear()
            try:
                failures = await asyncio.to_thread(
                    self._write_batch, [(writes, at) for writes, at, _ in batch]
                )
            except BaseException:  # the loop is going away: nobody waits in vain
                for _, _, written in batch:
                    written.cancel()
                raise
            for (_, _, written), failure in zip(batch, failures, strict=True):
                if written.done():  # its caller was cancelled
                    if failure is not None:
                        log.error("could not write a trace: %s", failure)
                elif failure is None:
                    written.set_result(None)
                else:
                    written.set_exception(failure)

    def _write_batch(
        self, batch: list[tuple[list[dict[str, Any]], datetime]]
    ) -> list[Exception | None]:
        """Runs in the worker thread: each call's traces, what stopped each (its waiter
        gets it, as if it had written them itself)."""
        failures: list[Exception | None] = []
        for traces, at in batch:
            try:
                self._write_all(traces, at)
            except Exception as exc:
                failures.append(exc)
            else:
                failures.append(None)
        return failures

    def _write_all(self, traces: list[dict[str, Any]], now: datetime) -> None:
        today = now.astimezone(UTC).date()
        if self._pruned != today:
            self._prune_old(today)
            self._pruned = today
        if self._total is None:
            self._total = _size(self.dir)
        for trace in traces:
            path = trace_path(self.dir.parent, str(trace["call_id"]))
            if path is None:
                continue
            data = encode_trace(trace)
            path.parent.mkdir(parents=True, exist_ok=True)
            old = path.stat().st_size if path.exists() else 0
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            self._total += len(data) - old
        if self._total > self.max_total_bytes:
            self._shrink()

    def _days(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if p.is_dir())

    def _prune_old(self, today: date) -> None:
        oldest = (today - timedelta(days=self.keep_days - 1)).isoformat()
        for day in self._days():
            if day.name < oldest:
                shutil.rmtree(day, ignore_errors=True)
        self._total = None

    def _shrink(self) -> None:
        """Remove the oldest traces until the whole stays under 90 % of the bound."""
        target = self.max_total_bytes * 9 // 10
        total = _size(self.dir)
        for day in self._days():
            files = sorted(day.iterdir(), key=lambda p: p.stat().st_mtime)
            for file in files:
                if total <= target:
                    break
                with contextlib.suppress(OSError):
                    size = file.stat().st_size
                    file.unlink()
                    total -= size
            with contextlib.suppress(OSError):
                day.rmdir()  # only when empty
            if total <= target:
                break
        self._total = total


def _size(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(p.stat().st_size for p in directory.glob("*/*") if p.is_file())


def _tool_results(previous: dict[str, Any], request: LLMRequest) -> list[dict[str, Any]]:
    """The tool messages of `request` that answer the tool calls of the previous call."""
    response = previous.get("response") or {}
    ids = {call.get("id") for call in response.get("tool_calls", ())}
    return [
        {
            "tool_call_id": message.tool_call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
        for message in request.messages
        if message.role == "tool" and message.tool_call_id in ids
    ]
