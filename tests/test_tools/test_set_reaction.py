"""set_reaction: one emoji on a message of the current chat, through the messenger.

The tool runner has already turned the model's alias (`m3`) into the platform message id;
the tool itself takes the id."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.errors import ToolError
from bot.tools.base import ToolContext
from bot.tools.set_reaction import TOOL, set_reaction
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock

GROUP = -100500


def context(messenger: RecordingMessenger, chat_id: int = GROUP) -> ToolContext:
    return ToolContext(
        chat_id=chat_id,
        thread_id=0,
        bot_id=999,
        clock=SteppingClock(datetime(2026, 11, 30, 12, 0, tzinfo=UTC)),
        messenger=messenger,
        platform_messages=InMemoryStore(),
    )


async def test_it_reacts_in_the_current_chat_and_says_with_what(
    messenger: RecordingMessenger,
) -> None:
    out = await set_reaction({"message_id": 17, "emoji": "👍"}, context(messenger))

    assert messenger.reactions == [(GROUP, 17, "👍")]
    assert json.loads(out) == {"reacted": "👍"}


async def test_the_chat_is_always_the_turns_own(messenger: RecordingMessenger) -> None:
    # a chat_id in the arguments is not a parameter of the tool: it is ignored
    await set_reaction({"message_id": 5, "emoji": "🎉", "chat_id": 1}, context(messenger, 77))

    assert messenger.reactions == [(77, 5, "🎉")]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"emoji": "👍"}, "bad_arguments"),
        ({"message_id": "m3", "emoji": "👍"}, "bad_arguments"),  # an alias not resolved
        ({"message_id": True, "emoji": "👍"}, "bad_arguments"),
        ({"message_id": 3}, "bad_arguments"),
        ({"message_id": 3, "emoji": "  "}, "bad_arguments"),
        ({"message_id": 3, "emoji": "👍" * 17}, "too_long"),
    ],
)
async def test_bad_arguments_are_refused_and_nothing_is_sent(
    messenger: RecordingMessenger, args: dict[str, object], code: str
) -> None:
    with pytest.raises(ToolError) as raised:
        await set_reaction(args, context(messenger))

    assert raised.value.code == code
    assert messenger.reactions == []


def test_its_schema_names_both_arguments() -> None:
    assert TOOL.spec.name == "set_reaction"
    assert sorted(TOOL.spec.parameters["required"]) == ["emoji", "message_id"]
