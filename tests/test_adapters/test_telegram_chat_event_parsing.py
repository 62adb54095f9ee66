"""The bot's membership changes and reactions: parsed into facts, routed, asked for, ordered."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from aiogram import Bot
from aiogram.types import Update

from adapters.telegram.app import build_dispatcher
from adapters.telegram.chat_event_parsing import parse_membership, parse_reaction
from adapters.telegram.polling_loop import handle_batch, poll_updates
from bot.domain.facts import InboundMessage, MembershipChange, ReactionChange, Sender
from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline

CHAT = -1001234567890
ALICE = {"id": 1001, "first_name": "Alice", "username": "alice"}
BOT_USER = {
    "id": 7172552019,
    "is_bot": True,
    "first_name": "☄MeteorBot",
    "username": "meteorcorp_bot",
}
NELSON = {
    "id": 5342492667, "is_bot": False, "first_name": "Nelson", "last_name": "II",
    "username": "drui909", "language_code": "en",
}  # fmt: skip

# Recorded `my_chat_member` payloads, from github.com/drui9/autogram (api.md, commit
# 0e737a5f7c8efdfd1764e012a08ecce6359ff046): the bot blocked in a private chat, and the
# bot added to a forum supergroup. Kept as recorded (update_id added).
RECORDED_PRIVATE_KICK: dict[str, Any] = {
    "update_id": 1,
    "my_chat_member": {
        "chat": {"id": 5342492667, "first_name": "Nelson", "last_name": "II",
                 "username": "drui909", "type": "private"},
        "from": NELSON,
        "date": 1737277000,
        "old_chat_member": {"user": BOT_USER, "status": "member"},
        "new_chat_member": {"user": BOT_USER, "status": "kicked", "until_date": 0},
    },
}  # fmt: skip
RECORDED_SUPERGROUP_ADD: dict[str, Any] = {
    "update_id": 2,
    "my_chat_member": {
        "chat": {"id": -1002162095988, "title": "Meteor Corp.", "username": "meteorCorp",
                 "is_forum": True, "type": "supergroup"},
        "from": NELSON,
        "date": 1737277649,
        "old_chat_member": {"user": BOT_USER, "status": "left"},
        "new_chat_member": {"user": BOT_USER, "status": "member"},
    },
}  # fmt: skip


def membership(update: dict[str, Any]) -> MembershipChange:
    parsed = Update.model_validate(update)
    assert parsed.my_chat_member is not None
    return parse_membership(parsed.my_chat_member, update_id=parsed.update_id)


def test_a_recorded_private_block_is_a_removal() -> None:
    assert membership(RECORDED_PRIVATE_KICK) == MembershipChange(
        update_id=1,
        chat_id=5342492667,
        chat_type="private",
        chat_title=None,
        date=datetime(2025, 1, 19, 8, 56, 40, tzinfo=UTC),
        actor=Sender(id=5342492667, name="Nelson II", username="drui909"),
        change="removed",
        status="kicked",
    )


def test_a_recorded_supergroup_add_is_an_addition() -> None:
    change = membership(RECORDED_SUPERGROUP_ADD)
    assert (change.chat_id, change.chat_type, change.chat_title) == (
        -1002162095988,
        "supergroup",
        "Meteor Corp.",
    )
    assert (change.change, change.status, change.actor.name) == ("added", "member", "Nelson II")


@pytest.mark.parametrize(
    ("old", "new", "change"),
    [
        ("left", "administrator", "added"),
        ("kicked", "restricted", "added"),  # restricted but a member: it can read the chat
        ("member", "administrator", "updated"),
        ("administrator", "member", "updated"),
        ("member", "left", "removed"),
        ("administrator", "kicked", "removed"),
    ],
    ids=["added-as-admin", "restricted-member", "promoted", "demoted", "left", "kicked"],
)
def test_membership_changes_say_whether_the_bot_can_still_talk_there(
    old: str, new: str, change: str
) -> None:
    update = FakeBotApi().member_update(CHAT, ALICE, old=old, new=new)
    parsed = membership({"update_id": 9, **update})
    assert (parsed.change, parsed.status) == (change, new)
    assert parsed.actor == Sender(id=1001, name="Alice", username="alice")


def test_a_reaction_change_lists_what_was_added_and_removed() -> None:
    update = {
        "update_id": 5,
        "message_reaction": {
            "chat": {"id": CHAT, "type": "supergroup", "title": "Team"},
            "message_id": 42,
            "user": {"id": 1001, "is_bot": False, "first_name": "Alice"},
            "date": 1737277000,
            "old_reaction": [{"type": "emoji", "emoji": "👍"}, {"type": "paid"}],
            "new_reaction": [
                {"type": "emoji", "emoji": "👎"},
                {"type": "custom_emoji", "custom_emoji_id": "5368324170671202286"},
                {"type": "paid"},
            ],
        },
    }
    parsed = Update.model_validate(update)
    assert parsed.message_reaction is not None
    assert parse_reaction(parsed.message_reaction, update_id=5) == ReactionChange(
        update_id=5,
        chat_id=CHAT,
        message_id=42,
        date=datetime(2025, 1, 19, 8, 56, 40, tzinfo=UTC),
        actor=Sender(id=1001, name="Alice"),
        added=("👎", "custom_emoji:5368324170671202286"),
        removed=("👍",),
    )


def test_an_anonymous_admins_reaction_names_the_group() -> None:
    update = FakeBotApi().reaction_update(
        CHAT,
        7,
        None,
        new=("🔥",),
        actor_chat={"id": CHAT, "type": "supergroup", "title": "Team"},
    )
    parsed = Update.model_validate({"update_id": 6, **update})
    assert parsed.message_reaction is not None
    reaction = parse_reaction(parsed.message_reaction, update_id=6)
    assert reaction.actor == Sender(id=CHAT, name="Team", kind="anonymous_admin")
    assert (reaction.added, reaction.removed) == (("🔥",), ())


# ------------------------------------------------------------------ routing over HTTP


class Recorder:
    """An `InboundSink` and `ChatEventSink` that records, in order, what reached it."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: list[InboundMessage | MembershipChange | ReactionChange] = []
        self.done = asyncio.Event()

    def _record(self, item: InboundMessage | MembershipChange | ReactionChange) -> None:
        self.seen.append(item)
        if len(self.seen) >= self.expected:
            self.done.set()

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        for message in messages:
            self._record(message)

    async def on_edit(self, message: InboundMessage) -> None:
        self._record(message)

    async def on_membership(self, change: MembershipChange) -> None:
        self._record(change)

    async def on_reaction(self, reaction: ReactionChange) -> None:
        self._record(reaction)


async def test_membership_and_reactions_are_asked_for_and_reach_the_sink(
    api: FakeBotApi, bot: Bot
) -> None:
    recorder = Recorder(expected=3)
    dispatcher = build_dispatcher(
        recorder, bot_id=api.bot_id, bot_username="test_bot", locale="en", chat_events=recorder
    )
    api.push_update(api.member_update(CHAT, ALICE, old="left", new="member"))
    api.push_update(api.reaction_update(CHAT, 1, ALICE, new=("👍",)))
    api.push_update(api.member_update(CHAT, ALICE, old="member", new="kicked"))
    stop = asyncio.Event()
    polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop, poll_seconds=1))
    try:
        await asyncio.wait_for(recorder.done.wait(), deadline(EVENT))
    finally:
        stop.set()
        await polling
    allowed = api.calls_of("getUpdates")[0]["allowed_updates"]
    assert {"message", "edited_message", "my_chat_member", "message_reaction"} <= set(allowed)
    added, kicked, reaction = recorder.seen  # membership changes run first in a batch
    assert isinstance(added, MembershipChange)
    assert isinstance(kicked, MembershipChange)
    assert (added.change, kicked.change) == ("added", "removed")
    assert isinstance(reaction, ReactionChange)
    assert (reaction.message_id, reaction.added, reaction.actor.id) == (1, ("👍",), 1001)


async def test_without_a_chat_event_sink_those_kinds_are_not_asked_for(
    api: FakeBotApi, bot: Bot
) -> None:
    recorder = Recorder(expected=1)
    dispatcher = build_dispatcher(recorder, bot_id=api.bot_id, bot_username="test_bot", locale="en")
    assert not {"my_chat_member", "message_reaction"} & set(dispatcher.resolve_used_update_types())


async def test_a_kick_in_a_batch_runs_before_that_chats_messages(api: FakeBotApi, bot: Bot) -> None:
    recorder = Recorder(expected=3)
    dispatcher = build_dispatcher(
        recorder, bot_id=api.bot_id, bot_username="test_bot", locale="en", chat_events=recorder
    )
    raw = [
        {"update_id": 10, **api.user_message(CHAT, ALICE, "first")},
        {"update_id": 11, **api.user_message(CHAT, ALICE, "second")},
        {"update_id": 12, **api.member_update(CHAT, ALICE, old="member", new="kicked")},
    ]
    await handle_batch(dispatcher, bot, [Update.model_validate(u) for u in raw])
    kinds = [type(item).__name__ for item in recorder.seen]
    assert kinds == ["MembershipChange", "InboundMessage", "InboundMessage"]


async def test_an_update_nothing_handles_is_skipped_with_a_logged_reason(
    api: FakeBotApi, bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(expected=1)
    dispatcher = build_dispatcher(recorder, bot_id=api.bot_id, bot_username="test_bot", locale="en")
    callback = {
        "update_id": 77,
        "callback_query": {
            "id": "4382bfdwdsb323b2d9",
            "from": ALICE | {"is_bot": False},
            "chat_instance": "-1000",
            "data": "menu",
        },
    }
    with caplog.at_level(logging.INFO, logger="adapters.telegram.app"):
        await dispatcher.feed_update(bot, Update.model_validate(callback))
    assert "skipping update 77: nothing handles callback_query updates" in caplog.text
    assert recorder.seen == []
