"""`DayFileTail`: only complete new lines, bad lines counted, a replaced file read again."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_tail import DayFileTail


def line(turn: str) -> bytes:
    entry = LedgerEntry(
        ts=datetime(2026, 3, 1, 9, tzinfo=UTC),
        session=1,
        chat=-1,
        scene="group",
        turn_id=turn,
        provider="p",
        model="m",
    )
    return entry.to_json_line().encode()


def test_it_reads_each_complete_line_once(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-01.jsonl"
    tail = DayFileTail(path)
    assert tail.read_new() == ([], False)  # no file yet
    path.write_bytes(line("a") + b"not json\n" + line("b")[:20])
    entries, restarted = tail.read_new()
    assert [e.turn_id for e in entries] == ["a"]
    assert (restarted, tail.corrupt) == (False, 1)
    with path.open("ab") as handle:  # the half-written line is finished
        handle.write(line("b")[20:] + line("c"))
    assert [e.turn_id for e in tail.read_new()[0]] == ["b", "c"]
    assert tail.read_new() == ([], False)


def test_a_replaced_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-01.jsonl"
    path.write_bytes(line("a") + line("b"))
    tail = DayFileTail(path)
    tail.skip_to_end()
    assert tail.read_new() == ([], False)
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(line("x"))
    os.replace(replacement, path)
    entries, restarted = tail.read_new()
    assert [e.turn_id for e in entries] == ["x"]
    assert restarted
