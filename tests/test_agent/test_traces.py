"""The trace format: a call id names its day, a trace is cut to its bound and says so, a
member is plain gzip named by its call."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

from bot.agent.trace_reader import read_trace
from bot.agent.traces import (
    CUT_STRING_CHARS,
    MAX_TRACE_CHARS,
    call_day,
    encode_trace,
    new_call_id,
    request_json,
)
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest

NOW = datetime(2026, 5, 10, 12, tzinfo=UTC)


def _trace(call_id: str, text: str = "hello") -> dict[str, object]:
    return {
        "call_id": call_id,
        "request": {"messages": [{"role": "user", "content": text}]},
        "response": {"text": "ok", "tool_calls": []},
        "tool_results": [],
        "truncated": False,
    }


# ---------------------------------------------------------------- ids and encoding


def test_a_call_id_names_its_day() -> None:
    at = datetime(2026, 3, 4, 23, 59, tzinfo=UTC)
    call_id = new_call_id(at)
    assert call_day(call_id) == at.date()
    assert call_day("../../etc/passwd") is None
    assert call_day("20261399-0123456789ab") is None
    assert read_trace(Path("/nonexistent"), "../../etc/passwd") is None


def test_a_huge_call_is_cut_and_says_so() -> None:
    data = encode_trace(_trace("20260101-0123456789ab", "x" * (MAX_TRACE_CHARS * 2)))
    stored = json.loads(gzip.decompress(data))
    assert stored["truncated"] is True
    content = stored["request"]["messages"][0]["content"]
    assert content.startswith("x" * CUT_STRING_CHARS)
    assert len(content) < CUT_STRING_CHARS + 40


def test_a_huge_request_of_the_in_process_model_is_cut_not_dropped() -> None:
    """The request as handed to the provider (no body sent): its long strings are cut like
    any other, and the request stays in the trace."""
    long = ChatMessage(role="user", content="x" * (MAX_TRACE_CHARS * 2))
    trace = {
        **_trace("20260101-0123456789ab"),
        "request": request_json(LLMRequest(model="m", messages=(long,))),
    }
    stored = json.loads(gzip.decompress(encode_trace(trace)))
    assert stored["truncated"] is True
    (message,) = stored["request"]["messages"]
    assert message["role"] == "user"
    assert message["content"].startswith("x" * CUT_STRING_CHARS)
    assert len(message["content"]) < CUT_STRING_CHARS + 40


def test_a_member_is_plain_gzip_named_by_its_call() -> None:
    """Any gzip tool reads a segment; the member's name lets a reader check it found the
    right one."""
    data = encode_trace(_trace("20260101-0123456789ab", "你好"))
    assert json.loads(gzip.decompress(data))["request"]["messages"][0]["content"] == "你好"
    flags, name = data[3], data[10:32]  # RFC 1952: FNAME, zero-terminated, after 10 bytes
    assert (flags & 8, name) == (8, b"20260101-0123456789ab\0")
