"""A stdio MCP server's stderr: read through a pipe and logged under the server's name,
rate-limited, never into the bot's own stderr.

Without this a server's stderr was the bot's (one tool call wrote 5.7 MB of raw lines into
the bot's log). Each line is cut at `LINE_CHARS`; at most `LINES_PER_MINUTE` are logged a
minute, and how many were left out is said once the minute is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO, cast

from bot.redact import scrub

log = logging.getLogger("tgbot.mcp")

LINE_CHARS = 300
LINES_PER_MINUTE = 20
_READ_BYTES = 65_536


class StderrLog:
    """The lines of one server's stderr, logged at most `LINES_PER_MINUTE` a minute."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._window = 0.0
        self._logged = 0
        self._left_out = 0

    def line(self, text: str, now: float) -> None:
        if now - self._window >= 60.0:
            self._flush()
            self._window, self._logged = now, 0
        if self._logged >= LINES_PER_MINUTE:
            self._left_out += 1
            return
        self._logged += 1
        cut = text[:LINE_CHARS] + ("…" if len(text) > LINE_CHARS else "")
        log.info("mcp server %s stderr: %s", self.name, scrub(cut))

    def _flush(self) -> None:
        if self._left_out:
            log.info("mcp server %s: %d more stderr lines not logged", self.name, self._left_out)
            self._left_out = 0

    def close(self) -> None:
        self._flush()


@asynccontextmanager
async def server_stderr(name: str) -> AsyncIterator[TextIO]:
    """A file to hand the server as its stderr; what it writes is logged (`StderrLog`)
    until the server closes it (it exits) and this block ends."""
    read_fd, write_fd = os.pipe()
    errlog = cast(TextIO, os.fdopen(write_fd, "w"))
    reader = asyncio.create_task(_read(read_fd, StderrLog(name)))
    try:
        yield errlog
    finally:
        errlog.close()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(1.0):  # the rest, once the server's end is closed too
                await asyncio.shield(reader)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def _read(fd: int, lines: StderrLog) -> None:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=_READ_BYTES)
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    pending = ""
    try:
        while chunk := await stream.read(_READ_BYTES):
            text = pending + chunk.decode("utf-8", errors="replace")
            *whole, pending = text.split("\n")
            if len(pending) > LINE_CHARS:  # a line that never ends: log its start only
                whole.append(pending)
                pending = ""
            now = time.monotonic()
            for line in whole:
                if line.strip():
                    lines.line(line.rstrip("\r"), now)
        if pending.strip():
            lines.line(pending, time.monotonic())
    finally:
        lines.close()
        transport.close()
