"""Issue 24 item 2, in process over the fake Bot API (aiogram's real client): in a private
chat a streamed reply is previewed with `sendMessageDraft`, the drafts growing as prefixes
of the final text under one draft id, then the final message is sent; a refusal turns
drafts off for that chat and the reply still arrives; groups get typing only.

The scripted model streams word by word; the presence clock is injected (each reading one
second later), so every prefix passes the one-a-second limit without sleeping. A second
test runs the real clock: a fast stream then shows at most one draft."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply
from bot.agent.reply import Presence
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from tests.test_reliability.conftest import BOT_TOKEN, LiveBot

ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
GROUP = -100555
ANSWER = "We ship on **Friday** after the review"


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[LiveBot]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}"
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url))
    async with FakeBotApi(BOT_TOKEN, username="test_bot") as api:
        bot = LiveBot(api, store, tmp_path)
        await bot.start()
        try:
            yield bot
        finally:
            await bot.close()
            await store.close()


def with_clock(live: LiveBot, monotonic: object, *, grace: float = 0.5) -> None:
    live.app.runner.presence = Presence(
        live.messenger,
        monotonic=monotonic,  # type: ignore[arg-type]
        grace=grace,
    )


async def ask(live: LiveBot, chat_id: int, text: str, **kw: object) -> None:
    update = live.api.user_message(chat_id, ALICE, text, **kw)  # type: ignore[arg-type]
    await live.handled(live.api.push_update(update))


async def test_drafts_grow_as_prefixes_of_the_final_reply(live: LiveBot) -> None:
    ticks = itertools.count()
    with_clock(live, lambda: float(next(ticks)))
    live.model.add(Reply(ANSWER))
    await ask(live, ALICE["id"], "when do we ship?", chat_type="private")

    drafts = live.api.calls_of("sendMessageDraft")
    # one a word from the second (the clock says a second passed); the first word is held
    assert len(drafts) == len(ANSWER.split()) - 1
    assert len({d["draft_id"] for d in drafts}) == 1
    assert drafts[0]["draft_id"] != 0
    final = live.api.sent_messages(ALICE["id"])[-1]
    assert final["text"] == "We ship on Friday after the review"  # Markdown → entities
    texts = [str(d["text"]) for d in drafts]
    assert all(final["text"].startswith(t) for t in texts)
    assert [len(t) for t in texts] == sorted(len(t) for t in texts)
    assert texts[-1] == final["text"]
    bold = [e for e in drafts[-1]["entities"] if e["type"] == "bold"]
    assert bold == [{"type": "bold", "offset": 11, "length": 6}]  # formatted like the reply
    order = [name for _, name, _ in live.api.timed_calls("sendMessageDraft", "sendMessage")]
    assert order[-1] == "sendMessage"


async def test_a_refused_draft_turns_drafts_off_and_the_reply_arrives(live: LiveBot) -> None:
    ticks = itertools.count()
    with_clock(live, lambda: float(next(ticks)))
    live.api.fail_next(
        "sendMessageDraft", error_code=400, description="Bad Request: method is not available"
    )
    live.model.add(Reply(ANSWER), Reply("again: Friday"))
    await ask(live, ALICE["id"], "when?", chat_type="private")
    assert len(live.api.calls_of("sendMessageDraft")) == 1  # refused once, then no more
    assert live.api.sent_messages(ALICE["id"])[-1]["text"].startswith("We ship on")

    await ask(live, ALICE["id"], "sure?", chat_type="private")
    assert len(live.api.calls_of("sendMessageDraft")) == 1  # off for this chat
    assert live.api.sent_messages(ALICE["id"])[-1]["text"] == "again: Friday"


async def test_the_real_clock_limits_drafts_to_about_one_a_second(live: LiveBot) -> None:
    live.model.add(Reply(" ".join(f"w{i}" for i in range(40))))
    await ask(live, ALICE["id"], "count", chat_type="private")
    # a stream much faster than a second: the first prefix shows, the rest wait for the reply
    assert len(live.api.calls_of("sendMessageDraft")) <= 2
    assert live.api.sent_messages(ALICE["id"])[-1]["text"].endswith("w39")


async def test_a_reply_that_arrives_in_one_piece_gets_no_draft(live: LiveBot) -> None:
    ticks = itertools.count()
    with_clock(live, lambda: float(next(ticks)))
    live.model.add(Reply("Friday."), Reply("On Friday."))  # streamed word by word
    await ask(live, ALICE["id"], "when?", chat_type="private")
    assert live.api.calls_of("sendMessageDraft") == [], "one piece: the reply alone"
    assert live.api.sent_messages(ALICE["id"])[-1]["text"] == "Friday."
    await ask(live, ALICE["id"], "sure?", chat_type="private")
    [draft] = live.api.calls_of("sendMessageDraft")
    assert draft["text"] == "On Friday."


async def test_a_reply_streamed_within_a_second_gets_no_draft(live: LiveBot) -> None:
    with_clock(live, lambda: 0.0)  # every piece arrives at once
    live.model.add(Reply("We ship on Friday after the review"))  # streamed word by word
    await ask(live, ALICE["id"], "when?", chat_type="private")
    assert live.api.calls_of("sendMessageDraft") == [], "a fast reply: the message alone"
    assert live.api.sent_messages(ALICE["id"])[-1]["text"] == "We ship on Friday after the review"


async def test_groups_get_typing_and_no_drafts(live: LiveBot) -> None:
    ticks = itertools.count()
    with_clock(live, lambda: float(next(ticks)), grace=0.0)  # typing at once
    live.model.add(Reply(ANSWER))
    await ask(live, GROUP, "@test_bot when?", chat_title="Team")
    assert live.api.calls_of("sendMessageDraft") == []
    assert live.api.calls_of("sendChatAction")
    assert live.api.sent_messages(GROUP)[-1]["text"].startswith("We ship")
