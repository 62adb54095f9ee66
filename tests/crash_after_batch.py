"""`tgbot run` that kills itself after its first stored batch, before the offset is confirmed.

The test entry point of `tests/test_reliability/test_batch_crash.py` (run as `python -m
tests.crash_after_batch` with the settings in the environment): the production `tgbot run`
with one `after_batch` hook, a SIGKILL, so nothing is flushed and no handler runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from bot.app.serve import run


def crash() -> None:
    logging.getLogger("tgbot.run").warning(
        "fault: killing the process before the offset is confirmed"
    )
    logging.shutdown()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> int:
    return asyncio.run(run(None, webhook=False, host="127.0.0.1", port=0, after_batch=crash))


if __name__ == "__main__":
    sys.exit(main())
