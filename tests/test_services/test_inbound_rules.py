"""The pure rules of the inbound path: `should_answer`, one rule live and after a crash."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.domain.facts import InboundMessage, Quote, Sender
from bot.domain.ids import Scene
from bot.domain.records import UserRecord
from bot.services.inbound_rules import (
    AnswerRules,
    BotIdentity,
    MessageFacts,
    facts_of_message,
    facts_of_record,
    should_answer,
)
from tests.fakes import ALICE

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

# ---------------------------------------------------------------- should_answer

PEER_BOT = Sender(id=2001, name="Peer", is_bot=True, kind="bot")
BOT = BotIdentity(id=999, username="helper_bot")
ALL = AnswerRules()
PLAIN = MessageFacts(from_bot=False)
MENTION = MessageFacts(from_bot=False, mentions_bot=True)
REPLY = MessageFacts(from_bot=False, replies_to_bot=True)
COMMAND = MessageFacts(from_bot=False, command=True)
SERVICE = MessageFacts(from_bot=False, service=True)
NAMELESS = BotIdentity(id=999, username=None)

CASES: dict[str, tuple[MessageFacts, Scene, AnswerRules, bool]] = {
    "private chatter": (PLAIN, "private", ALL, True),
    "owner chatter": (PLAIN, "owner", ALL, True),
    "group chatter": (PLAIN, "group", ALL, False),
    "group mention": (MENTION, "group", ALL, True),
    "group reply to the bot": (REPLY, "group", ALL, True),
    "group command": (COMMAND, "group", ALL, True),
    "mention, mentions off": (MENTION, "group", AnswerRules(on_mention=False), False),
    "reply, replies off": (REPLY, "group", AnswerRules(on_reply=False), False),
    "command, commands off": (COMMAND, "group", AnswerRules(on_command=False), False),
    "mention still counts with replies off": (MENTION, "group", AnswerRules(on_reply=False), True),
    "a bot in private": (MessageFacts(from_bot=True), "private", ALL, False),
    "a bot mentioning us": (MessageFacts(from_bot=True, mentions_bot=True), "group", ALL, False),
    "a private service message": (SERVICE, "private", ALL, False),
    "a group service message naming us": (
        MessageFacts(from_bot=False, service=True, mentions_bot=True), "group", ALL, False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_should_answer(case: str) -> None:
    facts, scene, rules, expected = CASES[case]
    assert should_answer(facts, scene, rules) is expected


def message(**changes: object) -> InboundMessage:
    base = InboundMessage(
        chat_id=-100, chat_type="supergroup", message_id=7, date=START, sender=ALICE, text="hi"
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        (message(), PLAIN),
        (message(mentions_bot=True), MENTION),
        (message(replies_to_bot=True), REPLY),
        (message(command="help"), COMMAND),
        (message(sender=PEER_BOT), MessageFacts(from_bot=True)),
        (message(event="Alice joined"), SERVICE),
    ],
    ids=["plain", "mention", "reply", "command", "bot", "service"],
)
def test_facts_of_a_live_message(live: InboundMessage, expected: MessageFacts) -> None:
    assert facts_of_message(live) == expected


@pytest.mark.parametrize(
    ("body", "bot", "expected"),
    [
        (UserRecord(sender=ALICE, text="lunch?"), BOT, PLAIN),
        (UserRecord(sender=ALICE, text="hey @Helper_Bot?"), BOT, MENTION),
        (UserRecord(sender=ALICE, text="hey @helper_bot"), NAMELESS, PLAIN),
        (UserRecord(sender=ALICE, text="and?", quote=Quote(id=6, sender_id=999)), BOT, REPLY),
        (UserRecord(sender=ALICE, text="and?", quote=Quote(id=6, sender_id=5)), BOT, PLAIN),
        (UserRecord(sender=ALICE, text="and?", quote=Quote(id=6)), BOT, PLAIN),
        (UserRecord(sender=ALICE, text="/retry"), BOT, COMMAND),
        (UserRecord(sender=PEER_BOT, text="@helper_bot hi"), BOT, replace(MENTION, from_bot=True)),
    ],
    ids=[
        "chatter", "mention-any-case", "name-unknown", "reply-to-bot", "reply-to-other",
        "reply-unresolved", "command", "bot",
    ],
)  # fmt: skip
def test_facts_of_a_stored_message(
    body: UserRecord, bot: BotIdentity, expected: MessageFacts
) -> None:
    assert facts_of_record(body, bot) == expected


def test_a_message_is_answered_the_same_live_and_after_a_crash() -> None:
    """The stored facts of a live message lead to the same decision in every scene."""
    live = message(text="@helper_bot what now?", mentions_bot=True)
    stored = UserRecord(sender=live.sender, text=live.text, quote=live.quote)
    for scene in ("group", "private", "owner"):
        assert should_answer(facts_of_message(live), scene, ALL) == should_answer(
            facts_of_record(stored, BOT), scene, ALL
        )
