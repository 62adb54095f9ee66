"""Trace files: bounded per call and in total, pruned by age, found from the id alone."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.agent.traces import (
    CUT_STRING_CHARS,
    MAX_TRACE_CHARS,
    TraceWriter,
    call_day,
    encode_trace,
    new_call_id,
    read_trace,
    request_json,
    trace_path,
)
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest


def _trace(call_id: str, text: str = "hello") -> dict[str, object]:
    return {
        "call_id": call_id,
        "request": {"messages": [{"role": "user", "content": text}]},
        "response": {"text": "ok", "tool_calls": []},
        "tool_results": [],
        "truncated": False,
    }


def test_a_call_id_names_its_day() -> None:
    at = datetime(2026, 3, 4, 23, 59, tzinfo=UTC)
    call_id = new_call_id(at)
    assert call_day(call_id) == at.date()
    assert call_day("../../etc/passwd") is None
    assert call_day("20261399-0123456789ab") is None


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


def test_old_days_are_pruned_and_the_total_is_bounded(tmp_path: Path) -> None:
    now = datetime(2026, 5, 10, 12, tzinfo=UTC)
    writer = TraceWriter(tmp_path, keep_days=2, max_total_bytes=60_000)
    old = new_call_id(now - timedelta(days=3))
    writer._write_all([_trace(old)], now - timedelta(days=3))
    assert read_trace(tmp_path, old) is not None
    ids = []
    for n in range(40):  # incompressible-ish text so the bound is reached
        call_id = new_call_id(now)
        ids.append(call_id)
        writer._write_all(
            [_trace(call_id, f"{n}" + "".join(f"{i * n:x}" for i in range(800)))], now
        )
    assert read_trace(tmp_path, old) is None, "a day past keep_days is gone"
    total = sum(p.stat().st_size for p in (tmp_path / "calls").glob("*/*"))
    assert total <= 60_000
    assert read_trace(tmp_path, ids[-1]) is not None, "the newest trace stays"
    assert read_trace(tmp_path, ids[0]) is None, "the oldest went first"
    path = trace_path(tmp_path, ids[-1])
    assert path is not None
    assert path.name.endswith(".json.gz")
