"""The ledger's day files: named by the bot's zone, appended off the loop in call order,
shared by processes without torn lines; scanned with bad lines counted, never raised."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from bot.agent.ledger_file import LedgerWriter, ledger_file
from bot.agent.ledger_read import read_entries
from tests.deadlines import EVENT, PROCESS_READY, deadline
from tests.test_agent.test_ledger import FULL, ROOT, SHANGHAI, T0, entry


def test_the_writer_names_files_by_the_day_in_the_bot_zone(tmp_path: Path) -> None:
    traces = tmp_path / "agent-traces"
    writer = LedgerWriter(traces, SHANGHAI)
    writer.append(entry(ts=datetime(2026, 3, 1, 15, 59, tzinfo=UTC)))  # 23:59 in Shanghai
    writer.append(entry(ts=datetime(2026, 3, 1, 16, 0, tzinfo=UTC)))  # 00:00 next day
    writer.append(entry(ts=datetime(2026, 3, 1, 16, 1, tzinfo=UTC)))
    assert sorted(p.name for p in traces.iterdir()) == ["2026-03-01.jsonl", "2026-03-02.jsonl"]
    assert (traces / "2026-03-02.jsonl").read_text().count("\n") == 2


async def test_append_async_writes_the_same_line(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, UTC)
    await writer.append_async(FULL)
    assert ledger_file(tmp_path, date(2026, 3, 1)).read_text() == FULL.to_json_line()


async def test_async_appends_land_in_call_order(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, UTC)
    await asyncio.gather(*(writer.append_async(entry(turn_id=f"t{i}")) for i in range(200)))
    assert [e.turn_id for e in read_entries(tmp_path)] == [f"t{i}" for i in range(200)]


async def test_flush_waits_for_lines_whose_callers_gave_up(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, UTC)
    tasks = [asyncio.create_task(writer.append_async(entry(turn_id=f"t{i}"))) for i in range(5)]
    await asyncio.sleep(0)  # every task has queued its line
    for task in tasks:
        task.cancel()
    await writer.flush()
    assert [e.turn_id for e in read_entries(tmp_path)] == [f"t{i}" for i in range(5)]


async def test_an_async_append_that_fails_raises_to_its_caller(tmp_path: Path) -> None:
    (tmp_path / "2026-03-01.jsonl").mkdir()  # the day file cannot be opened for writing
    writer = LedgerWriter(tmp_path, UTC)
    with pytest.raises(IsADirectoryError):
        await writer.append_async(entry())
    await writer.append_async(entry(ts=T0 + timedelta(days=1)))  # the writer goes on
    assert len(list(read_entries(tmp_path, start=date(2026, 3, 2)))) == 1


async def test_a_batch_writes_each_day_file_once_and_fails_only_its_own_lines(
    tmp_path: Path,
) -> None:
    """Lines queued together go to their day files in one write per file; a file that
    cannot be written fails its own callers, the other day's lines still land whole."""
    (tmp_path / "2026-03-01.jsonl").mkdir()  # the first day's file cannot be written
    writer = LedgerWriter(tmp_path, UTC)
    days = [T0 + timedelta(days=i % 2) for i in range(10)]
    results = await asyncio.gather(
        *(writer.append_async(entry(ts=ts, turn_id=f"t{i}")) for i, ts in enumerate(days)),
        return_exceptions=True,
    )
    assert [isinstance(r, IsADirectoryError) for r in results] == [True, False] * 5
    landed = [e.turn_id for e in read_entries(tmp_path, start=date(2026, 3, 2))]
    assert landed == [f"t{i}" for i in range(1, 10, 2)]


async def test_a_slow_disk_does_not_hold_up_the_event_loop(tmp_path: Path) -> None:
    """The day file is a FIFO: opening it for writing blocks until a reader comes, as a
    stalled disk would. The loop must keep running meanwhile (else the reader thread
    releases the writer after its timeout and the test fails instead of hanging)."""
    os.mkfifo(ledger_file(tmp_path, date(2026, 3, 1)))
    writer = LedgerWriter(tmp_path, UTC)
    loop_ran = threading.Event()
    received: list[bytes] = []

    def reader() -> None:
        released_in_time = loop_ran.wait(timeout=deadline(EVENT))
        with ledger_file(tmp_path, date(2026, 3, 1)).open("rb") as fifo:
            received.append(fifo.read())
        received.append(b"in time" if released_in_time else b"timed out")

    thread = threading.Thread(target=reader)
    thread.start()
    pending = asyncio.create_task(writer.append_async(FULL))
    for _ in range(5):
        await asyncio.sleep(0)  # the write is under way in the worker thread
    loop_ran.set()
    await pending
    await asyncio.to_thread(thread.join, 10)
    assert received == [FULL.to_json_line().encode(), b"in time"]


@pytest.mark.slow
def test_several_processes_append_without_tearing_lines(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from datetime import UTC, datetime
        from pathlib import Path
        from bot.agent.ledger import LedgerEntry
        from bot.agent.ledger_file import LedgerWriter
        writer = LedgerWriter(Path(sys.argv[1]), UTC)
        for i in range(300):
            writer.append(LedgerEntry(
                ts=datetime(2026, 3, 1, 12, tzinfo=UTC), session=int(sys.argv[2]), chat=1,
                scene="group", turn_id=f"{sys.argv[2]}-{i}", provider="p", model="m",
                error="x" * (i * 7 % 1500),
            ))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(n)], cwd=ROOT)
        for n in range(4)
    ]
    try:
        assert [p.wait(timeout=deadline(PROCESS_READY)) for p in procs] == [0, 0, 0, 0]
    finally:
        for p in procs:  # reaped however the wait ended
            p.kill()
            p.wait()
    scan = read_entries(tmp_path)
    entries = list(scan)
    assert (scan.corrupt, scan.partial) == (0, 0)
    assert len(entries) == 1_200
    assert len({(e.session, e.turn_id) for e in entries}) == 1_200


def write_lines(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_corrupt_and_partial_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    good = entry().to_json_line()
    write_lines(
        ledger_file(tmp_path, date(2026, 3, 1)),
        good + "not json\n\n" + '{"ts": 5}\n' + "1,2\n" + good + '{"ts":"2026-03-01T1',
    )
    scan = read_entries(tmp_path, start=date(2026, 3, 1), end=date(2026, 3, 1))
    assert len(list(scan)) == 2
    assert (scan.corrupt, scan.partial, scan.lines, scan.files_read) == (3, 1, 6, 1)


def test_a_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    write_lines(ledger_file(tmp_path, date(2026, 3, 1)), entry().to_json_line().rstrip("\n"))
    scan = read_entries(tmp_path)
    assert list(scan) == [entry()]
    assert scan.partial == 0


def test_the_range_reads_only_its_day_files(tmp_path: Path) -> None:
    for day in range(1, 6):
        ts = datetime(2026, 3, day, 12, tzinfo=UTC)
        LedgerWriter(tmp_path, UTC).append(entry(ts=ts, turn_id=str(day)))
    write_lines(tmp_path / "notes.jsonl", "garbage\n")
    write_lines(tmp_path / "2026-03-06.jsonl.bak", "garbage\n")
    scan = read_entries(tmp_path, start=date(2026, 3, 2), end=date(2026, 3, 4))
    assert [e.turn_id for e in scan] == ["2", "3", "4"]
    assert scan.files_read == 3
    assert [e.turn_id for e in read_entries(tmp_path, start=date(2026, 3, 4))] == ["4", "5"]
    assert [e.turn_id for e in read_entries(tmp_path, end=date(2026, 3, 1))] == ["1"]
    assert len(list(read_entries(tmp_path))) == 5


def test_a_missing_directory_reads_as_empty_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert list(read_entries(missing)) == []
    assert list(read_entries(missing, start=date(2026, 3, 1), end=date(2026, 3, 3))) == []
    assert not missing.exists()


def test_entries_is_the_scan_itself(tmp_path: Path) -> None:
    LedgerWriter(tmp_path, UTC).append(FULL)
    scan = read_entries(tmp_path, start=date(2026, 3, 1), end=date(2026, 3, 1))
    assert list(scan.entries) == list(scan) == [FULL]
