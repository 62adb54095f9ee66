"""Turn and call ids are drawn without a system call each, and still never repeat in
practice: 12 hex digits (a call id after its UTC day), leading zeros kept, and a forked
process draws its own."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

from bot.agent.runtime import new_turn_id
from bot.agent.traces import CALL_ID, call_day, new_call_id


def test_turn_ids_are_fixed_width_hex_and_do_not_repeat() -> None:
    ids = [new_turn_id() for _ in range(20_000)]
    assert all(re.fullmatch(r"[0-9a-f]{12}", value) for value in ids)
    assert len(set(ids)) == len(ids)
    assert any(value.startswith("0") for value in ids)  # zero-padded, not shortened


def test_call_ids_name_their_day_and_do_not_repeat() -> None:
    at = datetime(2026, 12, 5, 23, 59, tzinfo=UTC)
    ids = [new_call_id(at) for _ in range(20_000)]
    assert all(CALL_ID.fullmatch(value) for value in ids)
    assert {call_day(value) for value in ids} == {at.date()}
    assert len(set(ids)) == len(ids)


def test_a_forked_worker_draws_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report its next ids and leave at once
        os.write(write, " ".join(new_turn_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split())
    ours = {new_turn_id() for _ in range(8)}
    assert len(theirs) == 8
    assert not ours & theirs
