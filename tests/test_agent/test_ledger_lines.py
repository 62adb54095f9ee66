"""The ledger's one decoder reads recorded lines as it always did: lines as written, older
lines (before cache writes, stop reasons, call ids, every trim), odd and bad ones."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_read import _TABLE, entry_from_json

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "ledger"
LINES = (RECORDED / "lines.jsonl").read_text(encoding="utf-8").splitlines()
DECODED = (RECORDED / "decoded.txt").read_text(encoding="utf-8").splitlines()


def _outcome(line: str) -> str:
    try:
        return "entry: " + repr(entry_from_json(json.loads(line)))
    except ValueError as exc:
        return f"error: {type(exc).__name__}: {exc}"


@pytest.mark.parametrize(("line", "expected"), list(zip(LINES, DECODED, strict=True)))
def test_a_recorded_line_decodes_as_before(line: str, expected: str) -> None:
    """`decoded.txt` holds what the positional decoder made of each line of `lines.jsonl`
    (an entry's repr: every value with its type and time zone; or the error)."""
    assert _outcome(line) == expected


def test_the_recorded_lines_hold_every_kind_of_line() -> None:
    outcomes = [line.split(":")[0] for line in DECODED]
    assert outcomes.count("entry") >= 30
    assert outcomes.count("error") >= 10
    keys = [set(json.loads(line)) for line in LINES]
    every = {f.name for f in fields(LedgerEntry)}
    assert any(every <= line for line in keys)  # as written
    assert any("trim" in line for line in keys)  # before every trim was kept
    assert any("cache_write_tokens" not in line and "ts" in line for line in keys)


def test_the_table_reads_every_field_once() -> None:
    assert [key for key, _, _ in _TABLE] == [f.name for f in fields(LedgerEntry)]
