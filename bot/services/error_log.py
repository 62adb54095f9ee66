"""The error log: what went wrong outside a model call, one JSON line per event.

Failed model calls are ledger lines (their `error`); two other kinds of failure leave no
other durable trace, and the dashboard's error list needs them:
- `refused_send`: the Bot API refused a send (blocked, kicked, a bad request…), recorded by
  `RefusedSendLog` (`bot.services.messenger_relay`), a `Messenger` that wraps the adapter;
- `skipped_update`: an update that failed validation and was passed over (polling or webhook).

Layout: `<traces dir>/errors/YYYY-MM-DD.jsonl` (the day in the bot's zone), each line
`{"ts", "kind", "chat", "reason", "update_id"}`, appended with one `O_APPEND` write as the
ledger is, so processes may share the directory. The reason goes through `describe_error`'s
scrubbing and is cut to one short line. Readers skip a line that does not decode.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import Any, Literal

from bot.agent.error_text import MAX_ERROR_CHARS, describe_error
from bot.redact import scrub

log = logging.getLogger("tgbot.errors")

ErrorKind = Literal["refused_send", "skipped_update"]
KINDS: tuple[ErrorKind, ...] = ("refused_send", "skipped_update")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedError:
    ts: datetime
    kind: ErrorKind
    reason: str
    chat: int | None = None
    update_id: int | None = None

    def to_json_line(self) -> str:
        data: dict[str, Any] = {
            "ts": self.ts.astimezone(UTC).isoformat(timespec="milliseconds"),
            "kind": self.kind,
            "chat": self.chat,
            "reason": self.reason,
            "update_id": self.update_id,
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> LoggedError:
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            raise ValueError("not an error log line")
        ts = datetime.fromisoformat(str(data["ts"]))
        if ts.tzinfo is None:
            raise ValueError("ts must carry its offset")
        chat, update_id = data.get("chat"), data.get("update_id")
        return cls(
            ts=ts,
            kind=data["kind"],
            reason=str(data.get("reason") or ""),
            chat=chat if type(chat) is int else None,
            update_id=update_id if type(update_id) is int else None,
        )


def error_log_file(traces_dir: Path, day: date) -> Path:
    return traces_dir / "errors" / f"{day.isoformat()}.jsonl"


def one_line(reason: str) -> str:
    text = scrub(" ".join(reason.split()))
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


class ErrorLog:
    """Appends to the error log of the bot's zone (blocking, one small write: these are rare)."""

    def __init__(self, traces_dir: Path, zone: tzinfo) -> None:
        self.traces_dir = traces_dir
        self.zone = zone

    def append(self, error: LoggedError) -> None:
        path = error_log_file(self.traces_dir, error.ts.astimezone(self.zone).date())
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, error.to_json_line().encode())
        finally:
            os.close(fd)

    def record(self, error: LoggedError) -> None:
        """`append`, logging instead of raising: a failure to log a failure stops nothing."""
        try:
            self.append(error)
        except OSError:
            log.exception("could not write the error log")

    def skipped_update(self, update_id: int, reason: str) -> None:
        self.record(
            LoggedError(
                ts=datetime.now(UTC),
                kind="skipped_update",
                reason=one_line(reason),
                update_id=update_id,
            )
        )

    def refused_send(self, chat_id: int, error: BaseException) -> None:
        self.record(
            LoggedError(
                ts=datetime.now(UTC),
                kind="refused_send",
                reason=describe_error(error),
                chat=chat_id,
            )
        )


def read_errors(traces_dir: Path, days: list[date]) -> Iterator[LoggedError]:
    """The logged errors of `days`, file by file; a line that does not decode is skipped."""
    for day in days:
        try:
            data = error_log_file(traces_dir, day).read_bytes()
        except FileNotFoundError:
            continue
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                yield LoggedError.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue
