"""`plan_recovery`: what the end of a session's path asks for after a crash (pure).

The acting side (`CrashRecovery`) runs through the app in tests/test_reliability
(test_recovery.py over the in-memory store, test_crash.py with real killed processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.facts import Quote, Sender
from bot.domain.ids import Scene
from bot.domain.records import (
    AssistantRecord,
    RecordBody,
    ServiceMessageRecord,
    StoredRecord,
    SummaryRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.services.inbound_rules import AnswerRules, BotIdentity
from bot.services.recovery import (
    CloseCutReply,
    RecoveryStep,
    RunTurn,
    SayMissed,
    plan_recovery,
    unanswered,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ALICE = Sender(id=1001, name="Alice")
PEER_BOT = Sender(id=2001, name="Peer", is_bot=True, kind="bot")
BOT = BotIdentity(id=999, username="helper_bot")


def path(*items: tuple[RecordBody, timedelta, tuple[int | None, ...]]) -> list[StoredRecord]:
    """Records 1, 2, … in order, each `(body, age, message ids)`."""
    return [
        StoredRecord(
            id=n,
            session_id=1,
            parent_id=n - 1 or None,
            created_at=NOW - age,
            body=body,
            message_ids=ids,
        )
        for n, (body, age, ids) in enumerate(items, start=1)
    ]


def said(text: str, *, by: Sender = ALICE, quote: Quote | None = None) -> UserRecord:
    return UserRecord(sender=by, text=text, quote=quote)


MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)
REPLY = AssistantRecord(text="sure")
RESULTS = ToolResultsRecord(results=(ToolResult(call_id="c1", name="calc", content="42"),))
MENTION = said("@helper_bot lunch?")
HI = said("hi")
ANSWER_1 = RunTurn(reply_to=5, expect_leaf=1)
CUT = path((HI, 2 * HOUR, (5,)), (REPLY, 2 * HOUR, (6, None, None)))

CASES: dict[str, tuple[Scene, list[StoredRecord], RecoveryStep | None]] = {
    "nothing stored": ("private", [], None),
    "private, answered": ("private", path((said("hi"), MIN, (5,)), (REPLY, MIN, (6,))), None),
    "private, 2 min": ("private", path((HI, 2 * MIN, (5,))), ANSWER_1),
    "private, 10 min": ("private", path((HI, 10 * MIN, (5,))), ANSWER_1),
    "private, 11 min": ("private", path((said("hi"), 11 * MIN, (5,))), SayMissed(reply_to=5)),
    "private, 6 h": ("private", path((said("hi"), 6 * HOUR, (5,))), SayMissed(reply_to=5)),
    "private, 7 h": ("private", path((said("hi"), 7 * HOUR, (5,))), None),
    "private, refused by the rate limit": (
        "private", path((UserRecord(sender=ALICE, text="hi", refused=True), MIN, (5,))), None,
    ),
    "private, answered, refused after": (
        "private", path((HI, 2 * MIN, (5,)), (REPLY, 2 * MIN, (6,)),
                        (UserRecord(sender=ALICE, text="more", refused=True), MIN, (7,))),
        None,
    ),
    "group chatter": ("group", path((said("lunch?"), MIN, (5,))), None),
    "group mention": ("group", path((MENTION, MIN, (5,))), RunTurn(reply_to=5, expect_leaf=1)),
    "group mention, then chatter": (
        "group", path((MENTION, 2 * MIN, (5,)), (said("me too"), MIN, (6,))),
        RunTurn(reply_to=6, expect_leaf=2),
    ),
    "group mention, then an event": (
        "group",
        path((MENTION, 2 * MIN, (5,)), (ServiceMessageRecord(text="Bob joined"), MIN, (6,))),
        None,  # the newest record is the event: nothing to answer after it
    ),
    "group mention, an event, then chatter": (
        "group",
        path((MENTION, 3 * MIN, (5,)), (ServiceMessageRecord(text="Bob joined"), 2 * MIN, (6,)),
             (said("hi Bob"), MIN, (7,))),
        RunTurn(reply_to=7, expect_leaf=3),
    ),
    "group mention answered, then chatter": (
        "group", path((MENTION, 3 * MIN, (5,)), (REPLY, 2 * MIN, (6,)), (said("ok"), MIN, (7,))),
        None,
    ),
    "group mention, summary after it": (
        "group", path((MENTION, 3 * MIN, (5,)), (SummaryRecord(text="s"), 2 * MIN, ()),
                      (said("ok"), MIN, (7,))),
        None,
    ),
    "group reply to the bot": (
        "group", path((said("and?", quote=Quote(id=4, sender_id=999)), MIN, (5,))),
        RunTurn(reply_to=5, expect_leaf=1),
    ),
    "group command": ("group", path((said("/help"), MIN, (5,))), ANSWER_1),
    "a bot's message": ("private", path((said("hi", by=PEER_BOT), MIN, (5,))), None),
    "tool results, 5 min": (
        "group", path((MENTION, 6 * MIN, (5,)), (REPLY, 6 * MIN, ()), (RESULTS, 5 * MIN, ())),
        RunTurn(reply_to=5, expect_leaf=3),
    ),
    "tool results, 11 min": (
        "group", path((MENTION, 12 * MIN, (5,)), (REPLY, 12 * MIN, ()), (RESULTS, 11 * MIN, ())),
        None,
    ),
    "a reply cut short": ("private", CUT, CloseCutReply(reply=CUT[1])),
    "a reply nothing of which was confirmed": (
        "private", path((said("hi"), 2 * HOUR, (5,)), (REPLY, 2 * HOUR, (None,))), None,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_plan_recovery(case: str) -> None:
    scene, records, expected = CASES[case]
    step = plan_recovery(records, scene=scene, now=NOW, rules=AnswerRules(), bot=BOT)
    assert step == expected


def test_group_rules_apply_to_recovery_too() -> None:
    records = path((MENTION, MIN, (5,)))
    rules = AnswerRules(on_mention=False)
    assert plan_recovery(records, scene="group", now=NOW, rules=rules, bot=BOT) is None


def test_unanswered_lists_member_messages_after_the_last_reply_newest_first() -> None:
    records = path(
        (said("old"), 4 * MIN, (1,)),
        (REPLY, 3 * MIN, (2,)),
        (said("a"), 2 * MIN, (3,)),
        (ServiceMessageRecord(text="Bob joined"), 2 * MIN, (4,)),
        (said("b"), MIN, (5,)),
    )
    assert [body.text for body in unanswered(records)] == ["b", "a"]
