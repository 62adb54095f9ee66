"""Following one ledger day file as it grows: the reader of today's ledger for the dashboard's
day index and its live feed (whole files are read by `bot.agent.ledger_read.LedgerScan`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_read import entry_from_json


@dataclass(slots=True)
class DayFileTail:
    """Follows one day file: each `read_new` decodes the complete lines appended since the
    last read (an unterminated last line waits for its newline). A file that was replaced
    or shrank is read again from its start, and `read_new` says so. Bad lines are counted
    in `corrupt`, never raised. The dashboard's day index and its live feed both read
    today's ledger through this."""

    path: Path
    offset: int = 0
    inode: int | None = None
    corrupt: int = 0

    def skip_to_end(self) -> None:
        """Start after what is already written."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self.offset, self.inode = 0, None
        else:
            self.offset, self.inode = stat.st_size, stat.st_ino

    def read_new(self) -> tuple[list[LedgerEntry], bool]:
        """(the entries appended since the last read, whether the file was read again from
        its start: what was read before it no longer holds)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return [], False
        restarted = False
        if stat.st_ino != self.inode or stat.st_size < self.offset:
            restarted = self.inode is not None or self.offset > 0
            self.offset, self.inode, self.corrupt = 0, stat.st_ino, 0
        if stat.st_size == self.offset:
            return [], restarted
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read(stat.st_size - self.offset)
        end = data.rfind(b"\n") + 1
        self.offset += end
        entries: list[LedgerEntry] = []
        for line in data[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                entries.append(entry_from_json(json.loads(line)))
            except (ValueError, TypeError, KeyError, AttributeError):
                self.corrupt += 1
        return entries, restarted
