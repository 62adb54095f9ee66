"""The wall clock, in UTC: the one implementation of the `bot.ports.Clock` port outside tests."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    """The wall clock, in UTC: the one implementation of `Clock` outside tests."""

    def now(self) -> datetime:
        return datetime.now(UTC)


SYSTEM_CLOCK = SystemClock()
