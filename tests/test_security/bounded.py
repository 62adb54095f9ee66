"""A generous wall-clock bound for code that must be linear, interrupting it if it is not.

`within(seconds)` raises `TimeoutError` inside the block once `seconds` pass (SIGALRM: it
interrupts a regular expression mid-match, so an exponential pattern fails the test
instead of hanging it). The bounds used are orders of magnitude above what a linear scan
needs (milliseconds), so a slow machine never trips them; backtracking blows through them.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _expired(_signum: int, _frame: FrameType | None) -> None:
    raise TimeoutError("a linear scan took longer than its generous bound")


@contextmanager
def within(seconds: float) -> Iterator[None]:
    assert threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
