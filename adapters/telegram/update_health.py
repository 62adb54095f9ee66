"""Whether the bot still reads its updates: never silently deaf.

Every completed `getUpdates` (an answer, updates or none) is a sign of life (`polled`): it
feeds systemd's watchdog (`sd_notify("WATCHDOG=1")`, `READY=1` the first time, through the
`notify` it is given: `systemd_notifier()`, None outside systemd), so under systemd a bot that
stopped reading is restarted, and a process that merely runs is not enough. `/healthz` asks
`stalled()`: the reason when no `getUpdates` completed for longer than `stall_seconds`;
`/metrics` reports `age()` as `tgbot_last_update_age_seconds`. With a webhook the sign of
life is Telegram's `getWebhookInfo` answering without a recent delivery error
(`webhook_checked`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

Notify = Callable[[str], bool]


class UpdateHealth:
    """When updates were last read, and the bound past which the bot counts as deaf."""

    def __init__(
        self,
        *,
        stall_seconds: float,
        source: str = "getUpdates",
        now: Callable[[], float] = time.monotonic,
        notify: Notify | None = None,
    ) -> None:
        self.stall_seconds = stall_seconds
        self.source = source
        """What a sign of life is: `getUpdates`, or `getWebhookInfo` with a webhook."""
        self._now = now
        self._notify = notify
        self._started = now()
        self._last: float | None = None
        self._ready = False
        self._webhook_error: str | None = None

    def polled(self) -> None:
        """A `getUpdates` completed: updates are being read (the watchdog is fed)."""
        self._last = self._now()
        if not self._ready:  # the first poll only: every later one skips the call
            self._started_up()
        if self._notify is not None:
            self._notify("WATCHDOG=1")

    def _started_up(self) -> None:
        """`READY=1` once: the bot has reached Telegram (systemd's start is over)."""
        if not self._ready:
            self._ready = True
            if self._notify is not None:
                self._notify("READY=1")

    def webhook_checked(self, error: str | None) -> None:
        """`getWebhookInfo` answered: `error` is its recent delivery error (None: none)."""
        self._webhook_error = error
        if error is None:
            self.polled()
        else:  # started, but deaf: no watchdog ping, so systemd restarts it in time
            self._started_up()

    def age(self) -> float:
        """Seconds since updates were last read (since start, before the first read)."""
        return max(0.0, self._now() - (self._last if self._last is not None else self._started))

    def stalled(self) -> str | None:
        """Why the bot counts as deaf now, or None while it reads its updates."""
        if self._webhook_error is not None:
            return f"Telegram reports webhook delivery errors: {self._webhook_error}"
        age = self.age()
        if age <= self.stall_seconds:
            return None
        what = self.source if self._last is not None else f"{self.source} since start"
        return f"no {what} completed for {age:.0f} s (bound {self.stall_seconds:g} s)"
