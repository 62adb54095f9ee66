"""The one setting for how long tests wait on another process or thread.

Tests wait on events (a call recorded, a line logged, a process polling); the deadline is
only how long before a wait gives up and fails. Deadlines are generous for a loaded 2-core
machine; `TGBOT_TEST_DEADLINE_SCALE` multiplies every one of them (e.g. `3` under a debugger
or on a slower CI runner). It is read here and nowhere else.
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("TGBOT_TEST_DEADLINE_SCALE", "1"))
if SCALE <= 0:
    raise ValueError(f"TGBOT_TEST_DEADLINE_SCALE must be a positive number, not {SCALE}")

PROCESS_READY = 180.0
"""A `tgbot` process: from start until it polls, or a short command until it exits. A wait
returns when its event comes, so the bound costs a passing test nothing: it is sized for a
2-core machine running two copies of the suite beside other work (load 15 seen), where a
start that takes 2 s alone takes tens of seconds."""
EVENT = 180.0
"""One event from a running process (a reply sent, a row stored), as loaded as above."""
REAP = 30.0
"""A signalled process until it has exited."""


def deadline(seconds: float) -> float:
    """`seconds` scaled by TGBOT_TEST_DEADLINE_SCALE."""
    return seconds * SCALE
