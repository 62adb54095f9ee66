"""The trace of one model call: its id, its JSON, its gzip member, and the files' layout.

Layout. Per UTC day, append-only segments: `<traces dir>/calls/YYYY-MM-DD/<n>.gz`, each a
concatenation of gzip members (one per call, the call id as the member's file name), and
beside each its index `<n>.idx`, one line per member: `<call id> <offset> <length>`. A call
id starts with its UTC day (`20260101-<12 hex>`), so a trace is found from its id alone: read
that day's indexes (newest segment first, the last line of an id wins), seek, decompress one
member. Days written before segments hold one file per call, `<call id>.json.gz`; readers
take either (`bot.agent.trace_reader`). A torn tail (a crash or a full disk in the middle
of a write) costs the traces in it: readers skip a torn index line, and a member cut short
reads as damaged without touching the others. `bot.agent.trace_writer` writes the files.

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

Bounds. One trace holds at most `MAX_TRACE_CHARS` characters of JSON before compression:
a larger one has each long string cut (`truncated` says so). A member is compressed with
gzip level 1 (traces are written on every call and read rarely).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import struct
import zlib
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from bot.agent.error_text import describe_error
from bot.agent.events import ModelCalled
from bot.domain.messages import ImagePart
from bot.ports import LLMRequest, LLMResponse, SentBody

MAX_TRACE_CHARS = 1_000_000
"""One call's JSON before compression; past it every string is cut to `CUT_STRING_CHARS`."""
CUT_STRING_CHARS = 4_000

CALL_ID = re.compile(r"(\d{8})-[0-9a-f]{12}")
SEGMENT = re.compile(r"(\d{1,9})\.(gz|idx)")
"""A segment's file name (`<n>.gz`) or its index's (`<n>.idx`)."""
LEGACY_SUFFIX = ".json.gz"
"""A per-call file of the layout before segments."""


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


def segment_numbers(folder: Path, suffix: str) -> list[int]:
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    numbers = []
    for name in names:
        match = SEGMENT.fullmatch(name)
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


def trace_member(trace: dict[str, Any]) -> tuple[str, str, bytes] | None:
    """(day, call id, gzip member) of a trace; `None` for one without a call id."""
    call_id = str(trace.get("call_id"))
    day = call_day(call_id)
    if day is None:
        return None
    return day.isoformat(), call_id, encode_trace(trace)
