"""`StoreReferenceResolver`: stored events first, a bounded remote look-up, id-only fallback."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from adapters.telegram.references import StoreReferenceResolver
from bot.domain.facts import Media, Quote
from bot.ports import PlatformEvent

CHAT = -100
WHEN = datetime(2025, 11, 29, 6, 3, tzinfo=UTC)


class MemoryEvents:
    def __init__(self, *events: PlatformEvent) -> None:
        self.events = {(e.chat_id, e.message_id): e for e in events}

    async def record_events(self, events: Sequence[PlatformEvent]) -> None:
        self.events.update({(e.chat_id, e.message_id): e for e in events})

    async def find_event(self, chat_id: int, message_id: int) -> PlatformEvent | None:
        return self.events.get((chat_id, message_id))


async def test_a_stored_event_is_summarised_locally() -> None:
    event = PlatformEvent(
        chat_id=CHAT, message_id=9, sender_id=1001, date=WHEN, text="see\nthis",
        media=(Media(kind="voice", duration=3),),
    )  # fmt: skip
    resolver = StoreReferenceResolver(MemoryEvents(event), locale="zh")
    assert await resolver.resolve(CHAT, 9) == Quote(
        id=9, sender_id=1001, timestamp=WHEN, summary="[语音 3s] see this", chat_id=CHAT
    )


async def test_the_remote_lookup_answers_when_the_store_does_not() -> None:
    found = Quote(id=5, sender_id=7, summary="remote")

    async def remote(chat_id: int, message_id: int) -> Quote | None:
        return found

    resolver = StoreReferenceResolver(MemoryEvents(), locale="en", remote=remote)
    assert await resolver.resolve(CHAT, 5) is found


async def test_a_slow_or_failing_remote_keeps_only_the_id() -> None:
    never = asyncio.Event()

    async def hangs(chat_id: int, message_id: int) -> Quote | None:
        await never.wait()
        return None

    async def breaks(chat_id: int, message_id: int) -> Quote | None:
        raise ConnectionError("down")

    for remote in (hangs, breaks):
        resolver = StoreReferenceResolver(MemoryEvents(), locale="en", timeout=0.01, remote=remote)
        assert await resolver.resolve(CHAT, 5) == Quote(id=5, chat_id=CHAT)
