"""Resolving a quote target: stored platform events first, then a bounded remote look-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from adapters.telegram.quote_summaries import Locale, summarize
from bot.domain.facts import Quote
from bot.ports import PlatformEventStore

logger = logging.getLogger(__name__)

RemoteLookup = Callable[[int, int], Awaitable[Quote | None]]

DEFAULT_TIMEOUT = 3.0


class StoreReferenceResolver:
    """`bot.ports.ReferenceResolver` over the platform event store.

    A target found in the store is summarised locally. Otherwise the optional `remote`
    look-up runs under `timeout` seconds; when it fails, times out or is absent, the quote
    keeps only its id.
    """

    def __init__(
        self,
        events: PlatformEventStore,
        *,
        locale: Locale,
        timeout: float = DEFAULT_TIMEOUT,
        remote: RemoteLookup | None = None,
    ) -> None:
        self._events = events
        self._locale = locale
        self._timeout = timeout
        self._remote = remote

    async def resolve(self, chat_id: int, message_id: int) -> Quote | None:
        event = await self._events.find_event(chat_id, message_id)
        if event is not None:
            summary, truncated = summarize(event.text, event.media, self._locale)
            return Quote(
                id=message_id,
                sender_id=event.sender_id,
                timestamp=event.date,
                summary=summary,
                truncated=truncated,
                chat_id=chat_id,
            )
        if self._remote is not None:
            try:
                found = await asyncio.wait_for(self._remote(chat_id, message_id), self._timeout)
            except Exception as exc:  # TimeoutError included: keep the id only
                logger.warning("reference %s/%s not resolved: %r", chat_id, message_id, exc)
            else:
                if found is not None:
                    return found
        return Quote(id=message_id, chat_id=chat_id)
