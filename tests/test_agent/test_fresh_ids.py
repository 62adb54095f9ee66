"""Turn and call ids are drawn without a system call each, and still never repeat in
practice: 12 hex digits, leading zeros kept, a forked process draws its own."""

from __future__ import annotations

import os
import re

from bot.domain.ids import fresh_hex


def test_ids_are_fixed_width_hex_and_do_not_repeat() -> None:
    ids = [fresh_hex() for _ in range(20_000)]
    assert all(re.fullmatch(r"[0-9a-f]{12}", value) for value in ids)
    assert len(set(ids)) == len(ids)
    assert any(value.startswith("0") for value in ids)  # zero-padded, not shortened
    assert re.fullmatch(r"[0-9a-f]{4}", fresh_hex(4))


def test_a_forked_worker_draws_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report its next ids and leave at once
        os.write(write, " ".join(fresh_hex() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split())
    ours = {fresh_hex() for _ in range(8)}
    assert len(theirs) == 8
    assert not ours & theirs
