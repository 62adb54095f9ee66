"""`TelegramMessenger` through aiogram's real HTTP client against `FakeBotApi`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiogram import Bot

from adapters.telegram.bot_session import build_bot
from adapters.telegram.sender import TelegramMessenger
from adapters.telegram.text_units import utf16_len, utf16_slice
from bot.errors import (
    TelegramBadRequest,
    TelegramFloodWait,
    TelegramForbidden,
    TelegramNetworkError,
)
from bot.services.send_pacing import LocalSendPacer, PaceLimits
from testkit.fake_bot_api import FakeBotApi

CHAT = -1001234567890
ALICE = {"id": 1001, "first_name": "Alice"}


class RecordingSleep:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi() as server:
        yield server


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def messenger(bot: Bot, sleep: RecordingSleep) -> TelegramMessenger:
    return TelegramMessenger(bot, sleep=sleep)


def trigger(api: FakeBotApi, text: str = "tell me everything") -> int:
    update = api.user_message(CHAT, ALICE, text)
    return int(update["message"]["message_id"])


def long_text() -> str:
    paragraph = ("lorem ipsum " * 250).strip()  # 2,999 characters
    return "\n\n".join([paragraph] * 3)  # 9,001 characters


async def test_a_9000_char_reply_goes_out_as_3_bubbles_replying_to_the_trigger(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    trigger_id = trigger(api)
    delivery = await messenger.send_text(CHAT, long_text(), reply_to=trigger_id)
    sent = api.sent_messages(CHAT)
    assert delivery.error is None
    assert delivery.message_ids == tuple(m["message_id"] for m in sent)
    assert len(sent) == 3
    assert [m["text"] for m in sent] == list(delivery.texts)
    assert [m["reply_to_message"]["message_id"] for m in sent] == [trigger_id] * 3
    assert all(d is not None and d.tzinfo is not None for d in delivery.dates)
    assert api.calls_of("sendMessage")[0]["reply_parameters"] == {
        "message_id": trigger_id,
        "allow_sending_without_reply": True,
    }


async def test_a_partial_failure_keeps_what_was_delivered_and_stops(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    trigger_id = trigger(api)
    api.fail_next("sendMessage", error_code=403, description="Forbidden: bot was kicked", after=1)
    delivery = await messenger.send_text(CHAT, long_text(), reply_to=trigger_id)
    first = api.sent_messages(CHAT)[0]["message_id"]
    assert delivery.message_ids == (first, None, None)
    assert len(delivery.texts) == 3
    assert delivery.dates[1:] == (None, None)
    assert isinstance(delivery.error, TelegramForbidden)
    assert isinstance(delivery.error.__cause__, Exception)
    assert len(api.calls_of("sendMessage")) == 2  # bubble 3 was never tried


async def test_a_short_flood_wait_retries_the_same_bubble_once(
    api: FakeBotApi, messenger: TelegramMessenger, sleep: RecordingSleep
) -> None:
    api.fail_next(
        "sendMessage", error_code=429, description="Too Many Requests: retry after 3", retry_after=3
    )
    delivery = await messenger.send_text(CHAT, "hi")
    assert delivery.error is None
    assert delivery.message_ids == (api.sent_messages(CHAT)[0]["message_id"],)
    assert sleep.waits == [3.0]
    assert [c["text"] for c in api.calls_of("sendMessage")] == ["hi", "hi"]


@pytest.mark.parametrize(
    ("retry_after", "times", "waits"),
    [(30, 1, []), (2, 2, [2.0])],
    ids=["longer-than-max", "second-flood"],
)
async def test_a_flood_wait_that_cannot_be_retried_fails_the_slot(
    api: FakeBotApi,
    messenger: TelegramMessenger,
    sleep: RecordingSleep,
    retry_after: int,
    times: int,
    waits: list[float],
) -> None:
    api.fail_next(
        "sendMessage",
        error_code=429,
        description=f"Too Many Requests: retry after {retry_after}",
        retry_after=retry_after,
        times=times,
    )
    delivery = await messenger.send_text(CHAT, "hi")
    assert delivery.message_ids == (None,)
    assert isinstance(delivery.error, TelegramFloodWait)
    assert delivery.error.retry_after == retry_after
    assert sleep.waits == waits


async def test_thread_and_a_missing_reply_target_are_respected(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    delivery = await messenger.send_text(CHAT, "in topic", thread_id=300, reply_to=999)
    (sent,) = api.sent_messages(CHAT)
    assert delivery.message_ids == (sent["message_id"],)
    assert sent["message_thread_id"] == 300
    assert "reply_to_message" not in sent  # allow_sending_without_reply


async def test_blank_text_sends_nothing(api: FakeBotApi, messenger: TelegramMessenger) -> None:
    delivery = await messenger.send_text(CHAT, " \n ")
    assert delivery.message_ids == ()
    assert not delivery.delivered
    assert api.calls_of("sendMessage") == []


async def test_delete_and_react_reach_the_server(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    trigger_id = trigger(api)
    delivery = await messenger.send_text(CHAT, "oops")
    (sent_id,) = delivery.message_ids
    assert sent_id is not None
    await messenger.set_reaction(CHAT, trigger_id, "👍")
    await messenger.delete_message(CHAT, sent_id)
    assert api.reactions == [(CHAT, trigger_id, ("👍",))]
    assert api.deleted == [(CHAT, sent_id)]


async def test_send_photo_uploads_the_bytes(api: FakeBotApi, messenger: TelegramMessenger) -> None:
    png = b"\x89PNG\r\n\x1a\nfake"
    message_id = await messenger.send_photo(CHAT, png, caption="usage", thread_id=7)
    (sent,) = api.sent_messages(CHAT)
    assert sent["message_id"] == message_id
    assert sent["caption"] == "usage"
    assert sent["message_thread_id"] == 7
    assert api.photos == [(CHAT, png)]


@pytest.mark.parametrize(
    ("code", "description", "expected"),
    [
        (400, "Bad Request: message to delete not found", TelegramBadRequest),
        (403, "Forbidden: bot was blocked by the user", TelegramForbidden),
        (500, "Internal Server Error", TelegramNetworkError),
        (429, "Too Many Requests: retry after 5", TelegramFloodWait),
    ],
    ids=["bad-request", "forbidden", "server-error", "flood"],
)
async def test_aiogram_errors_map_into_the_error_tree(
    api: FakeBotApi,
    messenger: TelegramMessenger,
    code: int,
    description: str,
    expected: type[Exception],
) -> None:
    trigger_id = trigger(api)
    retry_after = 5 if code == 429 else None
    for method in ("deleteMessage", "setMessageReaction", "sendPhoto"):
        # a reaction's flood wait is waited out once: the second one is the error
        times = 2 if code == 429 and method == "setMessageReaction" else 1
        api.fail_next(
            method, error_code=code, description=description, retry_after=retry_after, times=times
        )
    with pytest.raises(expected) as caught:
        await messenger.delete_message(CHAT, trigger_id)
    assert caught.value.__cause__ is not None
    with pytest.raises(expected):
        await messenger.set_reaction(CHAT, trigger_id, "🔥")
    with pytest.raises(expected):
        await messenger.send_photo(CHAT, b"png")


async def test_deleting_a_missing_message_is_a_bad_request(messenger: TelegramMessenger) -> None:
    with pytest.raises(TelegramBadRequest):
        await messenger.delete_message(CHAT, 424242)


async def test_an_unreachable_api_is_a_network_error_in_the_delivery() -> None:
    api = FakeBotApi()
    await api.start()
    base = api.base_url
    await api.stop()  # nothing listens there any more
    bot = build_bot(api.token, base)
    try:
        delivery = await TelegramMessenger(bot).send_text(CHAT, "hello?")
    finally:
        await bot.session.close()
    assert delivery.message_ids == (None,)
    assert isinstance(delivery.error, TelegramNetworkError)


# ------------------------------------------------------------------ formatted replies


async def test_markdown_goes_out_as_entities_and_the_delivery_keeps_the_markdown(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    markdown = "## 结果\n\n**Done** 😀 see [docs](https://example.com/x) and `main.py`."
    delivery = await messenger.send_text(CHAT, markdown)
    (sent,) = api.sent_messages(CHAT)
    assert sent["text"] == "结果\n\nDone 😀 see docs and main.py."
    assert sent["entities"] == [
        {"type": "bold", "offset": 0, "length": 2},
        {"type": "bold", "offset": 4, "length": 4},
        {"type": "text_link", "offset": 16, "length": 4, "url": "https://example.com/x"},
        {"type": "code", "offset": 25, "length": 7},
    ]
    (call,) = api.calls_of("sendMessage")
    assert "parse_mode" not in call
    assert delivery.texts == (markdown,)  # what is stored: the model's words as written


async def test_plain_text_is_sent_without_entities(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    await messenger.send_text(CHAT, "no markup here, 2 * 3 = 6")
    (call,) = api.calls_of("sendMessage")
    assert call["text"] == "no markup here, 2 * 3 = 6"
    assert "entities" not in call


async def test_rejected_entities_resend_the_same_bubble_as_plain_text(
    api: FakeBotApi, messenger: TelegramMessenger, caplog: pytest.LogCaptureFixture
) -> None:
    trigger_id = trigger(api)
    api.reject_entities()
    delivery = await messenger.send_text(CHAT, "**bold** _claim_", reply_to=trigger_id)
    first, second = api.calls_of("sendMessage")
    assert first["entities"]
    assert first["text"] == "bold claim"
    assert second["text"] == "bold claim"
    assert "entities" not in second
    (sent,) = api.sent_messages(CHAT)
    assert sent["reply_to_message"]["message_id"] == trigger_id
    assert delivery.error is None
    assert delivery.message_ids == (sent["message_id"],)
    assert delivery.texts == ("**bold** _claim_",)
    assert "sending it as plain text" in caplog.text


async def test_only_the_rejected_bubble_falls_back_to_plain_text(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    part = " ".join(f"**w{n}**" for n in range(1200))  # 5,889 characters shown
    api.reject_entities()
    delivery = await messenger.send_text(CHAT, part)
    sent = api.sent_messages(CHAT)
    assert len(sent) == 2
    assert "entities" not in sent[0]
    assert len(sent[1]["entities"]) == len(sent[1]["text"].split())
    assert delivery.error is None
    assert all(mid is not None for mid in delivery.message_ids)


async def test_other_bad_requests_are_not_retried_as_plain_text(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    api.fail_next("sendMessage", error_code=400, description="Bad Request: chat not found")
    delivery = await messenger.send_text(CHAT, "**hello**")
    assert len(api.calls_of("sendMessage")) == 1
    assert delivery.message_ids == (None,)
    assert isinstance(delivery.error, TelegramBadRequest)


async def test_entities_across_the_4096_boundary_are_accepted_by_the_api_in_each_bubble(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    words = " ".join(["字😀"] * 1200)  # 4,799 UTF-16 units
    lines = [f"row_{n} = '字😀' * {n}" for n in range(400)]
    code_block = "\n".join(lines)
    markdown = f"*{words}*\n\n```python\n{code_block}\n```"
    delivery = await messenger.send_text(CHAT, markdown)
    sent = api.sent_messages(CHAT)
    assert delivery.error is None
    assert len(sent) == len(delivery.message_ids) == 4
    # The fake refuses any entity outside its text in UTF-16 units, as Telegram does.
    assert all(utf16_len(m["text"]) <= 4096 for m in sent)
    assert [[e["type"] for e in m["entities"]] for m in sent] == [
        ["italic"],
        ["italic", "pre"],
        ["pre"],
        ["pre"],
    ]
    italic = [utf16_slice(m["text"], *_span(m["entities"][0])) for m in sent[:2]]
    assert " ".join(italic) == words
    code = [utf16_slice(m["text"], *_span(m["entities"][-1])) for m in sent[1:]]
    assert "\n".join(code).split("\n") == lines


def _span(entity: dict[str, int]) -> tuple[int, int]:
    return entity["offset"], entity["length"]


# ---------------------------------------------------------------- pacing (virtual clock)


class VirtualClock:
    """A clock that moves only when the messenger sleeps: pacing without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def paced(bot: Bot, clock: VirtualClock) -> TelegramMessenger:
    pacer = LocalSendPacer(PaceLimits(), now=lambda: clock.now)
    return TelegramMessenger(bot, sleep=clock.sleep, pacer=pacer)


async def test_paced_bubbles_of_one_reply_go_a_second_apart_in_order(
    api: FakeBotApi, paced: TelegramMessenger, clock: VirtualClock
) -> None:
    delivery = await paced.send_text(CHAT, long_text())
    assert delivery.error is None
    assert clock.waits == [1.0, 1.0]
    assert [m["text"] for m in api.sent_messages(CHAT)] == list(delivery.texts)


async def test_a_429_pauses_the_chat_and_the_bubble_goes_after_retry_after(
    api: FakeBotApi, paced: TelegramMessenger, clock: VirtualClock
) -> None:
    api.fail_next(
        "sendMessage", error_code=429, description="Too Many Requests: retry after 7", retry_after=7
    )
    delivery = await paced.send_text(CHAT, "hi")
    assert delivery.error is None
    assert clock.waits == [7.0]  # the pause, waited out before the one retry
    assert [c["text"] for c in api.calls_of("sendMessage")] == ["hi", "hi"]


async def test_typing_and_drafts_are_skipped_while_the_chat_is_paused(
    api: FakeBotApi, paced: TelegramMessenger, clock: VirtualClock
) -> None:
    api.fail_next("setMessageReaction", error_code=429, description="Too Many Requests",
                  retry_after=30)  # fmt: skip
    with pytest.raises(TelegramFloodWait):  # longer than the messenger waits: an error
        await paced.set_reaction(CHAT, trigger(api), "👍")
    await paced.send_typing(CHAT)
    await paced.send_draft(ALICE["id"], 5, "partial")  # another chat: not paused
    assert api.calls_of("sendChatAction") == []
    assert len(api.calls_of("sendMessageDraft")) == 1
    assert clock.waits == []  # nothing waited for a courtesy


async def test_a_channel_direct_messages_topic_is_addressed_by_its_topic_id(
    api: FakeBotApi, messenger: TelegramMessenger
) -> None:
    chat = api.direct_messages_chat(-1009000, channel_id=-1009001, title="News")["id"]
    delivery = await messenger.send_text(chat, "answer", thread_id=77)
    assert delivery.error is None
    (call,) = api.calls_of("sendMessage")
    assert call["direct_messages_topic_id"] == 77
    assert "message_thread_id" not in call
    assert api.sent_messages(chat)[0]["direct_messages_topic"] == {"topic_id": 77}
    await messenger.send_typing(chat, thread_id=77)  # no chat actions there: skipped
    assert api.calls_of("sendChatAction") == []
    assert len(api.calls_of("getChat")) == 1  # asked once, remembered
    await messenger.send_text(CHAT, "forum", thread_id=5)
    assert api.calls_of("sendMessage")[-1]["message_thread_id"] == 5
