"""The turn scheduler on its own: which message merges or waits (`SessionTurns`), one turn
for a burst, one re-answer for a burst of edits, recovery's turn only if nothing moved, and
a crashed turn told to the chat. The whole inbound path runs in test_inbound.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from bot.agent.events import TurnOutcome
from bot.domain.facts import InboundMessage
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.ports import NewRecord, SessionInfo
from bot.services.turn_scheduler import PendingTurn, SessionTurns, TurnScheduler
from bot.services.turn_spawning import queue_edit, spawn_turn
from bot.texts import text
from testkit.memory_store import InMemoryStore
from tests.deadlines import EVENT, deadline
from tests.fakes import ALICE, BOB, RecordingMessenger, inbound

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@dataclass(slots=True)
class RecordingRunner:
    """Stands in for `TurnRunner`: records each turn's session and reply target."""

    turns: list[tuple[int, int | None]] = field(default_factory=list)
    crash: Exception | None = None

    async def run_turn(
        self, session: SessionInfo, *, reply_to: int | None, trigger: str | None = None
    ) -> TurnOutcome:
        self.turns.append((session.id, reply_to))
        if self.crash is not None:
            raise self.crash
        return TurnOutcome(status="answered", text="ok")


def scheduler(
    store: InMemoryStore, runner: RecordingRunner, messenger: RecordingMessenger, window: float
) -> TurnScheduler:
    return TurnScheduler(
        store=store,
        runner=runner,  # type: ignore[arg-type]
        messenger=messenger,
        locale="en",
        merge_window_seconds=window,
    )


def message(message_id: int, *, sender: int = ALICE.id, body: str = "hi") -> InboundMessage:
    who = ALICE if sender == ALICE.id else BOB
    return inbound(message_id=message_id, text=body, sender=who, at=T0)


async def a_session(store: InMemoryStore) -> SessionInfo:
    return await store.open_session(SessionKey(chat_id=-100500), scene="group")


async def pending_of(sender_id: int, *, started: bool) -> PendingTurn:
    async def nothing() -> None:
        return None

    task = asyncio.create_task(nothing())
    await task
    return PendingTurn(task=task, sender_id=sender_id, reply_to=1, started=started)


@pytest.mark.parametrize(
    ("pending", "deferred", "answer", "merges", "holds_back"),
    [
        (None, False, True, False, False),
        ("alice-waiting", False, True, True, False),
        ("bob-waiting", False, True, False, True),
        ("bob-waiting", False, False, False, False),
        ("bob-started", False, True, False, False),
        ("alice-started", False, True, False, False),
        (None, True, False, False, True),
    ],
    ids=[
        "nothing pending",
        "own burst merges",
        "another's waiting turn holds it back",
        "chatter is never held back",
        "a started turn holds nothing back",
        "a started turn merges nothing",
        "a sender with messages waiting keeps their order",
    ],
)
async def test_which_message_merges_and_which_waits(
    pending: str | None, deferred: bool, answer: bool, merges: bool, holds_back: bool
) -> None:
    state = SessionTurns()
    if pending is not None:
        who, how = pending.split("-")
        state.pending = await pending_of(
            ALICE.id if who == "alice" else BOB.id, started=how == "started"
        )
    if deferred:
        state.deferred[ALICE.id] = 1
    assert state.merges(ALICE.id) is merges
    assert state.holds_back(ALICE.id, answer=answer) is holds_back


@pytest.mark.parametrize("answer", [True, False], ids=["addressed", "chatter"])
async def test_while_anyone_waits_to_join_every_message_of_the_chat_waits(answer: bool) -> None:
    """Bob's message waits to join: Alice's, addressed or not, waits behind it (a chat's
    messages are stored in Telegram's order), even once no turn is pending any more."""
    state = SessionTurns()
    state.deferred[BOB.id] = 1
    assert state.holds_back(ALICE.id, answer=answer) is True
    state.pending = await pending_of(BOB.id, started=False)
    assert state.holds_back(ALICE.id, answer=answer) is True


async def test_a_burst_of_one_sender_is_one_turn_for_its_last_message() -> None:
    store, runner, messenger = InMemoryStore(), RecordingRunner(), RecordingMessenger()
    turns = scheduler(store, runner, messenger, window=3600.0)
    session = await a_session(store)
    turns.schedule(session, message(1))
    turns.schedule(session, message(2))
    pending = turns.state(session.id).pending
    assert pending is not None
    assert pending.reply_to == 2
    pending.hurry.set()  # no waiting out an hour: the turn starts now
    # a first turn left waiting (not cancelled) would hold drain for the hour
    await asyncio.wait_for(turns.drain(), deadline(EVENT))
    assert runner.turns == [(session.id, 2)]
    assert turns.state(session.id).pending is None


async def test_edits_queued_behind_a_turn_are_answered_once_with_the_last_text() -> None:
    store, runner, messenger = InMemoryStore(), RecordingRunner(), RecordingMessenger()
    turns = scheduler(store, runner, messenger, window=0)
    session = await a_session(store)
    seen: list[str] = []

    async def reanswer(newest: InboundMessage) -> None:
        seen.append(newest.text)

    async with turns.turn_lock(session):  # a turn is running: the edits queue behind it
        queue_edit(turns, session, message(5, body="first"), reanswer)
        queue_edit(turns, session, message(5, body="second"), reanswer)
        queue_edit(turns, session, message(5, body="third"), reanswer)
    await turns.drain()
    assert seen == ["third"]


async def test_recovery_turn_runs_only_if_the_conversation_did_not_move() -> None:
    store, runner, messenger = InMemoryStore(), RecordingRunner(), RecordingMessenger()
    turns = scheduler(store, runner, messenger, window=0)
    session = await a_session(store)
    body = UserRecord(sender=ALICE, text="hi")
    (first,) = await store.append(session.id, [NewRecord(body=body, created_at=T0)])
    (second,) = await store.append(session.id, [NewRecord(body=body, created_at=T0)])
    spawn_turn(turns, session, reply_to=7, expect_leaf=first.id)  # another worker moved on
    await turns.drain()
    assert runner.turns == []
    spawn_turn(turns, session, reply_to=8, expect_leaf=second.id)
    await turns.drain()
    assert runner.turns == [(session.id, 8)]


async def test_a_retry_turn_runs_on_a_branch_from_the_given_record() -> None:
    store, runner, messenger = InMemoryStore(), RecordingRunner(), RecordingMessenger()
    turns = scheduler(store, runner, messenger, window=0)
    session = await a_session(store)
    body = UserRecord(sender=ALICE, text="hi")
    first, _second = await store.append(
        session.id, [NewRecord(body=body, created_at=T0), NewRecord(body=body, created_at=T0)]
    )
    spawn_turn(turns, session, reply_to=1, leaf=first.id)
    await turns.drain()
    assert runner.turns == [(session.id, 1)]
    found = await store.find_session(session.key)
    assert found is not None
    assert found.active_leaf_id == first.id


async def test_a_crashed_turn_is_told_to_the_chat_once() -> None:
    store, messenger = InMemoryStore(), RecordingMessenger()
    runner = RecordingRunner(crash=RuntimeError("bug"))
    turns = scheduler(store, runner, messenger, window=0)
    session = await a_session(store)
    spawn_turn(turns, session, reply_to=3)
    await turns.drain()
    assert [(m.text, m.reply_to) for m in messenger.sent] == [(text("en", "internal_error"), 3)]
    assert list(turns.outcomes) == []
