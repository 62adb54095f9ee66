"""From finding 28.11: one 100 kB reply went out as up to 25 messages, and splitting it
held the event loop (every chat) for 1–5 s. Now a reply is at most MAX_BUBBLES_PER_REPLY
messages, the last one says it was cut, and planning runs off the event loop on a source
cut to a bounded length. Through the real `TelegramMessenger` against the fake Bot API."""

from __future__ import annotations

import pytest

from adapters.telegram.bot_session import build_bot
from adapters.telegram.markdown_entities import MAX_BUBBLES_PER_REPLY, plan_reply
from adapters.telegram.sender import TelegramMessenger
from testkit.fake_bot_api import FakeBotApi

LONG_REPLIES = {
    "list lines": "- item\n" * 15_000,
    "bold words": "**a** " * 17_000,
    "links": "[a](http://x.y) " * 6_000,
    "plain words": "word " * 20_000,
}


@pytest.mark.parametrize("reply", list(LONG_REPLIES.values()), ids=list(LONG_REPLIES))
async def test_a_long_reply_is_capped_and_says_so(reply: str) -> None:
    async with FakeBotApi(username="test_bot") as api:
        bot = build_bot(api.token, api.base_url)
        messenger = TelegramMessenger(bot, cut_note="cut: at most {count} messages")
        try:
            delivery = await messenger.send_text(5, reply)
        finally:
            await bot.session.close()
        sent = api.sent_messages(5)
        assert delivery.delivered
        assert 2 <= len(sent) <= MAX_BUBBLES_PER_REPLY
        assert sent[-1]["text"] == f"cut: at most {MAX_BUBBLES_PER_REPLY} messages"


def test_a_short_reply_is_not_cut() -> None:
    bubbles = plan_reply("Hello **there**.\n\n- one\n- two")
    assert len(bubbles) == 1
    assert "cut" not in bubbles[0].text
