"""A message in a channel's direct-messages chat (Bot API 9.2) is read into its topic.

The fixture is composed from the Bot API reference (core.telegram.org/bots/api: `Message.
direct_messages_topic` is a `DirectMessagesTopic` with `topic_id` and `user`; the chat is a
supergroup with `is_direct_messages`), not captured: the public payloads found in the code
index were hand-written test shapes too (some with a private chat carrying the topic).
"""

from __future__ import annotations

from typing import Any

from aiogram.types import Update

from adapters.telegram.parsing import parse_update_strict
from bot.domain.ids import SessionKey
from bot.services.inbound_rules import key_of

CAROL = {"id": 1003, "is_bot": False, "first_name": "Carol", "username": "carol_c"}
DIRECT_MESSAGE: dict[str, Any] = {
    "update_id": 900090,
    "message": {
        "message_id": 14,
        "from": CAROL,
        "chat": {
            "id": -1002468013579,
            "title": "Rocket News Direct Messages",
            "type": "supergroup",
            "is_direct_messages": True,
        },
        "direct_messages_topic": {"topic_id": 1003, "user": CAROL},
        "date": 1764396900,
        "text": "@test_bot when is the next launch?",
        "entities": [{"offset": 0, "length": 9, "type": "mention"}],
    },
}


def test_each_direct_messages_topic_is_its_own_conversation_named_for_its_user() -> None:
    update = Update.model_validate(DIRECT_MESSAGE)
    message = parse_update_strict(update, bot_id=777, bot_username="test_bot", locale="en")
    assert message is not None
    assert message.thread_id == 1003  # direct_messages_topic.topic_id
    assert key_of(message) == SessionKey(chat_id=-1002468013579, thread_id=1003)
    assert message.sender.name == "Carol"
    assert message.topic_first_name == "direct messages with Carol"
    assert message.mentions_bot
