"""The trace writer: bounded in total, pruned by age; appended to day segments with an
index, read back one member at a time, torn tails survived; held for tool results."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.agent.trace_reader import TraceReader, read_trace, trace_path
from bot.agent.trace_writer import OPEN_TURNS, TraceWriter
from bot.agent.traces import encode_trace, new_call_id
from bot.domain.messages import ChatMessage, ToolCall
from bot.ports import LLMRequest, LLMResponse
from tests.deadlines import EVENT, deadline
from tests.test_agent.rig import AT, model_call

NOW = datetime(2026, 5, 10, 12, tzinfo=UTC)


def _trace(call_id: str, text: str = "hello") -> dict[str, object]:
    return {
        "call_id": call_id,
        "request": {"messages": [{"role": "user", "content": text}]},
        "response": {"text": "ok", "tool_calls": []},
        "tool_results": [],
        "truncated": False,
    }


def _noise(n: int, size: int = 800) -> str:
    """Text that gzip cannot shrink much, so that bounds are reached."""
    return f"{n}:" + "".join(f"{(i * 7919 + n * 104729) % 65521:x}" for i in range(size))


def _files(traces: Path) -> list[Path]:
    return sorted(p for p in (traces / "calls").rglob("*") if p.is_file())


def _total(traces: Path) -> int:
    return sum(p.stat().st_size for p in _files(traces))


# ---------------------------------------------------------------- the layout


def test_many_traces_round_trip_across_segments_and_days(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, keep_days=7, segment_bytes=20_000)
    written: dict[str, str] = {}
    for day in range(3):
        at = NOW - timedelta(days=2 - day)
        for batch in range(20):
            traces = []
            for _ in range(1 + batch % 4):  # calls that ended together: one write each
                call_id = new_call_id(at)
                written[call_id] = _noise(len(written), 200)
                traces.append(_trace(call_id, written[call_id]))
            writer._write_all(traces, at)
    reader = TraceReader(tmp_path)
    for call_id, text in written.items():
        trace = reader.read(call_id)
        assert trace is not None, call_id
        assert trace["request"]["messages"][0]["content"] == text
        assert read_trace(tmp_path, call_id) == trace
    days = sorted(p.name for p in (tmp_path / "calls").iterdir())
    assert days == [(NOW - timedelta(days=d)).date().isoformat() for d in (2, 1, 0)]
    for name in days:
        names = {p.name for p in (tmp_path / "calls" / name).iterdir()}
        segments = sorted(int(name.split(".")[0]) for name in names if name.endswith(".gz"))
        assert len(segments) > 1, "segments rotate at their size"
        assert segments == list(range(len(segments)))
        assert names == {f"{n}.gz" for n in segments} | {f"{n}.idx" for n in segments}
    assert len(_files(tmp_path)) < len(written) / 5
    assert read_trace(tmp_path, new_call_id(NOW)) is None, "an id never written"


def test_traces_written_before_segments_are_still_read(tmp_path: Path) -> None:
    """A data dir from before the change: one `<call id>.json.gz` per call (no member
    name), beside the segments written since, in the same day folder."""
    old = new_call_id(NOW)
    path = trace_path(tmp_path, old)
    assert path is not None
    assert path == tmp_path / "calls" / "2026-05-10" / f"{old}.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(json.dumps(_trace(old, "from before")).encode()))
    new = new_call_id(NOW)
    TraceWriter(tmp_path)._write_all([_trace(new, "since")], NOW)
    assert read_trace(tmp_path, old) == _trace(old, "from before")
    assert read_trace(tmp_path, new) == _trace(new, "since")
    broken = new_call_id(NOW)
    (path.parent / f"{broken}.json.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="damaged"):
        read_trace(tmp_path, broken)


def test_old_days_are_pruned_and_the_total_is_bounded(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, keep_days=2, max_total_bytes=60_000)
    old = new_call_id(NOW - timedelta(days=3))
    writer._write_all([_trace(old)], NOW - timedelta(days=3))
    assert read_trace(tmp_path, old) is not None
    ids = []
    for n in range(40):
        call_id = new_call_id(NOW)
        ids.append(call_id)
        writer._write_all([_trace(call_id, _noise(n))], NOW)
        assert _total(tmp_path) <= 60_000
    assert read_trace(tmp_path, old) is None, "a day past keep_days is gone"
    assert read_trace(tmp_path, ids[-1]) is not None, "the newest trace stays"
    assert read_trace(tmp_path, ids[0]) is None, "the oldest went first"
    kept = [read_trace(tmp_path, call_id) is not None for call_id in ids]
    assert kept == sorted(kept), "only the oldest went, whole segments"
    assert sum(kept) > len(ids) / 3, "segments are small next to the bound"


def test_the_bound_takes_the_old_layouts_files_before_newer_segments(tmp_path: Path) -> None:
    day = tmp_path / "calls" / NOW.date().isoformat()
    day.mkdir(parents=True)
    legacy = [new_call_id(NOW) for _ in range(5)]
    for n, call_id in enumerate(legacy):
        (day / f"{call_id}.json.gz").write_bytes(encode_trace(_trace(call_id, _noise(n))))
    writer = TraceWriter(tmp_path, max_total_bytes=40_000)
    ids = [new_call_id(NOW) for _ in range(30)]
    for n, call_id in enumerate(ids):
        writer._write_all([_trace(call_id, _noise(100 + n))], NOW)
    assert _total(tmp_path) <= 40_000
    assert all(read_trace(tmp_path, call_id) is None for call_id in legacy)
    assert read_trace(tmp_path, ids[-1]) is not None


def test_a_torn_tail_costs_only_the_traces_in_it(tmp_path: Path) -> None:
    """A crash in the middle of a write: half a member at the end of the segment, half an
    index line. The traces before it read; a restarted writer appends after it and its
    traces read too; an index line whose member was cut short says so."""
    writer = TraceWriter(tmp_path)
    before = [new_call_id(NOW) for _ in range(5)]
    writer._write_all([_trace(call_id, _noise(n)) for n, call_id in enumerate(before)], NOW)
    day = tmp_path / "calls" / NOW.date().isoformat()
    torn = new_call_id(NOW)
    member = encode_trace(_trace(torn, _noise(99)))
    with (day / "0.gz").open("ab") as segment:
        segment.write(member[: len(member) // 2])
    with (day / "0.idx").open("ab") as index:
        index.write(f"{torn} 12".encode())  # no length, no newline

    restarted = TraceWriter(tmp_path)
    after = [new_call_id(NOW) for _ in range(3)]
    restarted._write_all([_trace(call_id, _noise(50 + n)) for n, call_id in enumerate(after)], NOW)
    for n, call_id in enumerate(before):
        assert read_trace(tmp_path, call_id) == _trace(call_id, _noise(n))
    for n, call_id in enumerate(after):
        assert read_trace(tmp_path, call_id) == _trace(call_id, _noise(50 + n))
    assert read_trace(tmp_path, torn) is None

    # the member written, then the file cut (a power cut before it reached the disk)
    data = (day / "0.gz").read_bytes()
    (day / "0.gz").write_bytes(data[:-10])
    with pytest.raises(ValueError, match="damaged"):
        read_trace(tmp_path, after[-1])
    assert read_trace(tmp_path, after[0]) == _trace(after[0], _noise(50))


def test_two_writers_share_a_day(tmp_path: Path) -> None:
    """The workers of one host share `DATA_DIR`: their batches interleave in one segment,
    each index line names its own member."""
    first, second = TraceWriter(tmp_path), TraceWriter(tmp_path)
    written: dict[str, str] = {}
    for n in range(30):
        writer = first if n % 3 else second
        call_id = new_call_id(NOW)
        written[call_id] = _noise(n, 100)
        writer._write_all([_trace(call_id, written[call_id])], NOW)
    for call_id, text in written.items():
        trace = read_trace(tmp_path, call_id)
        assert trace is not None
        assert trace["request"]["messages"][0]["content"] == text


# ---------------------------------------------------------------- through the bus


def _asks_tools(call_id: str, turn: str = "t1") -> Any:
    return model_call(
        call_id=call_id,
        turn_id=turn,
        request=LLMRequest(model="m", messages=(ChatMessage(role="user", content="go"),)),
        response=LLMResponse(tool_calls=(ToolCall(id="c1", name="lookup", arguments="{}"),)),
    )


def _answers(call_id: str, turn: str = "t1") -> Any:
    messages = (
        ChatMessage(role="user", content="go"),
        ChatMessage(
            role="assistant",
            content="",
            tool_calls=(ToolCall(id="c1", name="lookup", arguments="{}"),),
        ),
        ChatMessage(role="tool", content="found it", tool_call_id="c1", name="lookup"),
    )
    return model_call(
        call_id=call_id,
        turn_id=turn,
        request=LLMRequest(model="m", messages=messages),
        response=LLMResponse(text="done"),
    )


def _index_lines(traces: Path, call_id: str) -> int:
    return sum(p.read_text().count(call_id) for p in (traces / "calls").rglob("*.idx"))


async def test_a_tool_calling_call_is_written_once_with_its_results(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path)
    first, second = new_call_id(AT), new_call_id(AT)
    await writer.on_model_call(_asks_tools(first))
    await writer.drain()
    assert read_trace(tmp_path, first) is None, "held until its results come"
    await writer.on_model_call(_answers(second))
    await writer.drain()
    trace = read_trace(tmp_path, first)
    assert trace is not None
    assert trace["tool_results"] == [
        {"tool_call_id": "c1", "name": "lookup", "content": "found it", "is_error": False}
    ]
    assert _index_lines(tmp_path, first) == 1
    final = read_trace(tmp_path, second)
    assert final is not None
    assert final["response"]["text"] == "done"


async def test_flush_writes_what_is_held(tmp_path: Path) -> None:
    """A clean stop in the middle of a tool call loses nothing; results that still come
    are written with it (the newer copy is the one read)."""
    writer = TraceWriter(tmp_path)
    first = new_call_id(AT)
    await writer.on_model_call(_asks_tools(first))
    await writer.flush()
    trace = read_trace(tmp_path, first)
    assert trace is not None
    assert trace["tool_results"] == []
    assert trace["response"]["tool_calls"][0]["id"] == "c1"
    assert not writer._segments, "the files are closed"

    await writer.on_model_call(_answers(new_call_id(AT)))
    await writer.drain()
    again = read_trace(tmp_path, first)
    assert again is not None
    assert [r["content"] for r in again["tool_results"]] == ["found it"]


async def test_a_held_trace_is_written_after_a_while(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, hold_seconds=0.01)
    wrote = threading.Event()
    write_batch = writer._write_batch

    def noticed(*args: Any, **kwargs: Any) -> list[Exception | None]:
        failures = write_batch(*args, **kwargs)
        wrote.set()
        return failures

    writer._write_batch = noticed  # type: ignore[method-assign]
    first = new_call_id(AT)
    await writer.on_model_call(_asks_tools(first))
    assert await asyncio.to_thread(wrote.wait, deadline(EVENT))
    assert read_trace(tmp_path, first) is not None
    await writer.on_model_call(_answers(new_call_id(AT)))
    await writer.drain()
    trace = read_trace(tmp_path, first)
    assert trace is not None
    assert trace["tool_results"], "rewritten with its results"


async def test_too_many_waiting_turns_write_the_oldest(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path)
    ids = [new_call_id(AT) for _ in range(OPEN_TURNS + 1)]
    for n, call_id in enumerate(ids):
        await writer.on_model_call(_asks_tools(call_id, turn=f"t{n}"))
    await writer.drain()
    assert read_trace(tmp_path, ids[0]) is not None
    assert read_trace(tmp_path, ids[1]) is None
    await writer.flush()
    assert all(read_trace(tmp_path, call_id) is not None for call_id in ids)


async def test_the_turn_goes_on_while_the_trace_is_written(tmp_path: Path) -> None:
    """The publisher hands the trace over and returns; the worker thread writes it."""
    writer = TraceWriter(tmp_path)
    release = threading.Event()
    write_batch = writer._write_batch

    def slow(*args: Any, **kwargs: Any) -> list[Exception | None]:
        release.wait(deadline(EVENT))
        return write_batch(*args, **kwargs)

    writer._write_batch = slow  # type: ignore[method-assign]
    call_id = new_call_id(AT)
    await writer.on_model_call(_answers(call_id))  # returns although the disk is "stuck"
    assert read_trace(tmp_path, call_id) is None
    release.set()
    await writer.drain()
    assert read_trace(tmp_path, call_id) is not None


async def test_a_failed_write_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    writer = TraceWriter(blocked)
    call_id = new_call_id(AT)
    await writer.on_model_call(_answers(call_id))
    await writer.flush()
    assert f"could not write the traces of calls {call_id}" in caplog.text
    good = TraceWriter(tmp_path)
    await good.on_model_call(_answers(call_id))
    await good.flush()
    assert read_trace(tmp_path, call_id) is not None


def test_the_end_of_the_loop_waits_for_the_traces(tmp_path: Path) -> None:
    """No `flush`: a loop that ends (`asyncio.run`, a test's runner) still leaves every
    trace handed over, and the held ones, on disk before it returns, so a caller may remove
    the directory right after."""
    writer = TraceWriter(tmp_path)
    ids = [new_call_id(AT) for _ in range(3)]

    async def turns() -> None:
        await writer.on_model_call(_answers(ids[0], turn="t1"))
        await writer.on_model_call(_asks_tools(ids[1], turn="t2"))
        await writer.on_model_call(_answers(ids[2], turn="t3"))

    asyncio.run(turns())
    assert all(read_trace(tmp_path, call_id) is not None for call_id in ids)


def test_a_segment_another_worker_pruned_is_opened_anew(tmp_path: Path) -> None:
    """Two workers share the directory; one's bound removes the segment the other has open.
    The other notices (it looks every `STALE_CHECK_SECONDS`) and writes to a new file
    instead of one nobody can read."""
    mine = TraceWriter(tmp_path)
    mine.stale_check_seconds = 0
    first = new_call_id(NOW)
    mine._write_all([_trace(first)], NOW)
    other = TraceWriter(tmp_path, max_total_bytes=10_000)
    other._write_all([_trace(new_call_id(NOW), _noise(n)) for n in range(10)], NOW)
    assert read_trace(tmp_path, first) is None, "pruned by the other worker"
    later = new_call_id(NOW)
    mine._write_all([_trace(later, "still kept")], NOW)
    assert read_trace(tmp_path, later) == _trace(later, "still kept")
