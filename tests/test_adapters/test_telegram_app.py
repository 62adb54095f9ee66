"""End to end over real HTTP: the bot's poller polls `FakeBotApi` through aiogram's client,
parsed messages reach the sink."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiogram import Bot
from aiogram.types import Update

from adapters.telegram.app import build_dispatcher
from adapters.telegram.polling_loop import ParseErrorHook, poll_updates
from bot.domain.facts import InboundMessage
from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline

CHAT = -1001234567890
ALICE = {"id": 1001, "first_name": "Alice", "last_name": "Liu", "username": "alice"}
BOB = {"id": 1002, "first_name": "Bob"}


class RecordingSink:
    """An `InboundSink` that records each message it gets once (a redelivery is a
    duplicate, as in the inbound service) and signals after `expected`."""

    def __init__(self, expected: int, *, fail_on: str | None = None) -> None:
        self.expected = expected
        self.fail_on = fail_on
        self.received: list[tuple[str, InboundMessage]] = []
        self.done = asyncio.Event()

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        for message in messages:
            self._record("message", message)

    async def on_edit(self, message: InboundMessage) -> None:
        self._record("edit", message)

    def _record(self, kind: str, message: InboundMessage) -> None:
        if any((k, m.update_id) == (kind, message.update_id) for k, m in self.received):
            return
        self.received.append((kind, message))
        if len(self.received) >= self.expected:
            self.done.set()
        if message.text == self.fail_on:
            raise RuntimeError("the sink broke")


async def poll_until(
    bot: Bot, api: FakeBotApi, sink: RecordingSink, on_parse_error: ParseErrorHook | None = None
) -> None:
    dispatcher = build_dispatcher(
        sink,
        bot_id=api.bot_id,
        bot_username=api.username,
        locale="en",
        on_parse_error=on_parse_error,
    )
    stop = asyncio.Event()
    polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop, poll_seconds=1))
    try:
        await asyncio.wait_for(sink.done.wait(), deadline(EVENT))
    finally:
        stop.set()
        await polling


async def test_polling_delivers_parsed_messages_and_edits(api: FakeBotApi, bot: Bot) -> None:
    sink = RecordingSink(expected=3)
    first = api.user_message(CHAT, ALICE, "@test_bot hello")
    first_id = first["message"]["message_id"]
    api.push_update(first)
    api.push_update(api.user_message(CHAT, BOB, "hi Alice", reply_to=first_id, quote="hello"))
    api.push_update(
        api.user_message(CHAT, ALICE, "@test_bot hello!", message_id=first_id, edit=True)
    )

    await poll_until(bot, api, sink)

    kinds = [kind for kind, _ in sink.received]
    messages = sorted((m for _, m in sink.received), key=lambda m: m.update_id or 0)
    assert sorted(kinds) == ["edit", "message", "message"]
    hello, reply, edit = messages
    assert (hello.text, hello.mentions_bot, hello.sender.name) == (
        "@test_bot hello",
        True,
        "Alice Liu",
    )
    assert reply.quote is not None
    assert (reply.quote.id, reply.quote.sender_id, reply.quote.summary) == (first_id, 1001, "hello")
    assert reply.quote.fragment
    assert (edit.is_edit, edit.message_id, edit.text) == (True, first_id, "@test_bot hello!")
    offsets = [c.get("offset") for c in api.calls_of("getUpdates")]
    assert offsets[-1] == 4  # all three updates were confirmed


async def test_a_broken_update_or_sink_does_not_stop_polling(api: FakeBotApi, bot: Bot) -> None:
    sink = RecordingSink(expected=3, fail_on="boom")
    errors: list[int] = []

    async def on_parse_error(update: Update, exc: Exception) -> None:
        errors.append(update.update_id)

    api.push_update(api.user_message(CHAT, ALICE, "boom"))
    # A message without `from` is odd but valid: parsed best effort, not an error.
    odd = api.user_message(CHAT, BOB, "odd")
    del odd["message"]["from"]
    api.push_update(odd)
    api.push_update(api.user_message(CHAT, BOB, "still here"))

    await poll_until(bot, api, sink, on_parse_error=on_parse_error)

    assert [m.text for _, m in sink.received] == ["boom", "odd", "still here"]
    assert sink.received[1][1].sender.id == 0
    assert errors == []


async def test_topic_messages_drop_the_implicit_reply(api: FakeBotApi, bot: Bot) -> None:
    sink = RecordingSink(expected=1)
    api.push_update(api.user_message(CHAT, ALICE, "in the topic", thread_id=300))
    await poll_until(bot, api, sink)
    ((_, message),) = sink.received
    assert (message.thread_id, message.quote, message.replies_to_bot) == (300, None, False)


async def test_a_parse_error_is_reported_and_skipped(api: FakeBotApi, bot: Bot) -> None:
    sink = RecordingSink(expected=1)
    errors: list[tuple[int, str]] = []

    async def on_parse_error(update: Update, exc: Exception) -> None:
        errors.append((update.update_id, type(exc).__name__))

    dispatcher = build_dispatcher(
        sink, bot_id=api.bot_id, bot_username=None, locale="zh", on_parse_error=on_parse_error
    )
    data = api.user_message(CHAT, ALICE, "fine") | {"update_id": 77}
    update = Update.model_validate(data, context={"bot": bot})
    assert update.message is not None
    object.__setattr__(update.message, "entities", [object()])  # what no schema allows
    await dispatcher.feed_update(bot, update)
    assert errors == [(77, "AttributeError")]
    assert sink.received == []
