"""The confirm-after-handling poller: a database hiccup delays an update, it never drops it;
a bug in handling one update never blocks the rest of the chat."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiogram.types import Update

from adapters.telegram import polling_loop
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import handle_batch
from bot.domain.facts import InboundMessage
from bot.errors import StorageUnavailable


class FlakySink:
    """Fails the first `failures` deliveries of message 2 with the given error; stores a
    message once (a redelivered one is a duplicate), as the inbound service does."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.stored: list[int] = []

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        for message in messages:
            if message.message_id in self.stored:
                continue
            if message.message_id == 2 and self.failures > 0:
                self.failures -= 1
                raise self.error
            self.stored.append(message.message_id)

    async def on_edit(self, message: InboundMessage) -> None:
        raise AssertionError("no edits here")


@pytest.fixture(autouse=True)
def quick_storage_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retries' waits shrunk (the same doubling, from 10 ms): what is retried is the point."""
    monkeypatch.setattr(polling_loop, "STORAGE_RETRY_DELAY", 0.01)


def update(update_id: int, message_id: int) -> Update:
    return Update.model_validate(
        {
            "update_id": update_id,
            "message": {
                "message_id": message_id,
                "date": 1764500000 + message_id,
                "chat": {"id": 5, "type": "private", "first_name": "Ann"},
                "from": {"id": 5, "is_bot": False, "first_name": "Ann"},
                "text": f"message {message_id}",
            },
        }
    )


async def run(sink: FlakySink) -> None:
    bot = build_bot("1:offline", "http://127.0.0.1:9")  # never contacted
    dispatcher = build_dispatcher(sink, bot_id=1, bot_username="b", locale="en")
    try:
        await handle_batch(dispatcher, bot, [update(12, 3), update(10, 1), update(11, 2)])
    finally:
        await bot.session.close()


async def test_a_storage_outage_is_retried_and_order_is_kept() -> None:
    sink = FlakySink(failures=2, error=StorageUnavailable("database is locked"))
    await run(sink)
    assert sink.stored == [1, 2, 3]


async def test_a_bug_in_handling_skips_that_update_only() -> None:
    # the batch fails, then message 2 fails alone: the others are stored all the same
    sink = FlakySink(failures=2, error=RuntimeError("bug"))
    await run(sink)
    assert sink.stored == [1, 3]
