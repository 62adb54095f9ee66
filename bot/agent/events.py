"""Runtime events (trims, turn outcomes) delivered to the log and to subscribers."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.context.history_trim import HistoryTrimmed

log = logging.getLogger("tgbot.events")

Subscriber = Callable[[HistoryTrimmed], Awaitable[None] | None]


@dataclass(slots=True)
class EventBus:
    """Fan-out of `HistoryTrimmed` events; a failing subscriber never breaks a turn."""

    subscribers: list[Subscriber]

    def __init__(self) -> None:
        self.subscribers = []

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.append(subscriber)

    async def publish(self, event: HistoryTrimmed) -> None:
        log.info(
            "HistoryTrimmed session=%s turn=%s reason=%s dropped_turns=%d dropped_messages=%d "
            "kept_turns=%d tokens %d->%d budget=%d",
            event.session,
            event.turn_id,
            event.reason,
            event.dropped_turns,
            event.dropped_messages,
            event.kept_turns,
            event.tokens_before,
            event.tokens_after,
            event.budget,
        )
        for subscriber in list(self.subscribers):
            try:
                outcome = subscriber(event)
                if outcome is not None:
                    await outcome
            except Exception:
                log.exception("a HistoryTrimmed subscriber failed")
