"""Crash recovery: at start-up, finish or close the turns a crash interrupted.

A turn runs after its trigger is committed, tool calls are stored together with their
results, and reply bubbles are stored one by one as Telegram confirms them, so a crash
leaves one of three shapes at the end of a session's active path, and we treat them the way
a person would expect (`plan_recovery` decides, `CrashRecovery` acts):

- the trigger is the newest record (the crash came before or during the model call, or
  during a tool whose result was not stored yet): when it arrived less than
  `RECOVERY_ANSWER_WINDOW` (10 min) ago the turn runs again and answers it; the model gets
  the same conversation, with no half-finished tool call in it. When it is older (up to
  `RECOVERY_NOTICE_WINDOW`, 6 h) an answer would come out of the blue, so the bot replies
  once "I was restarted and missed this, please ask again". Older than that: nothing.
  Only a message the live path would have answered counts (`inbound_rules.should_answer`: in
  groups a mention of the bot, a reply to it, a command); chatter stays unanswered.
- tool results are the newest record (the crash came between two model calls): the turn
  continues from them, within the same answer window.
- the newest record is a reply with unconfirmed bubbles (the crash came in the middle of a
  multi-bubble reply): the confirmed bubbles stay stored and the record is replaced by one
  holding only them (`settle_partial_reply`); the bot then says that its reply was cut
  short by a restart and that `/retry` gives the whole answer. Resending the missing
  bubbles could duplicate one Telegram delivered but never confirmed.

Several workers may start at once: each session is decided under its turn lock on a fresh
read, and a turn recovery starts runs only if the conversation has not moved since.

With several workers (PostgreSQL) a worker killed mid-turn is not restarted by anyone, so
each running worker also scans for orphaned turns (`recover_orphans`, every
`runtime.orphan_scan_seconds`, bot/app/recovery_loop.py) and decides them the same way. A
turn is orphaned when its session's leaf awaits an answer (one query:
`sessions_awaiting_answer`), the worker saw that same leaf waiting a grace period ago (the
merge window and a margin: a turn just stored and about to start is not taken), and no
worker holds or, in this worker, awaits the chat's turn lock (taken without waiting; a
live turn holds it). Only a turn is run (`RunTurn`): late notices and cut replies are left
to start-up, which says them once. A leaf the scan recovered is not recovered again by
this worker, so a turn that fails without storing anything is retried at most once here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.agent.partial_reply import settle_partial_reply
from bot.agent.runtime import TurnRunner
from bot.domain.ids import Locale, Scene
from bot.domain.platform_messages import Delivery
from bot.domain.records import (
    AssistantRecord,
    ServiceMessageRecord,
    StoredRecord,
    ToolResultsRecord,
    UserRecord,
)
from bot.ports import Clock, Messenger, SessionInfo
from bot.services.guard import PrivateChats, chat_allowed
from bot.services.inbound_rules import (
    AnswerRules,
    BotIdentity,
    facts_of_record,
    last_member_record,
    should_answer,
)
from bot.services.turn_scheduler import TurnScheduler
from bot.services.turn_spawning import spawn_turn, try_turn_lock
from bot.store_ports import HistoryStore, PlatformMessages, SessionStore
from bot.texts import text

log = logging.getLogger("tgbot.inbound")

RECOVERY_ANSWER_WINDOW = timedelta(minutes=10)
RECOVERY_NOTICE_WINDOW = timedelta(hours=6)


# ---------------------------------------------------------------- the decision


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTurn:
    """Run the session's turn (again, or on from stored tool results)."""

    reply_to: int | None
    expect_leaf: int
    """Only if this is still the newest record when the turn starts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SayMissed:
    """Too late to answer: say once that the bot missed the message."""

    reply_to: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseCutReply:
    """Keep the confirmed bubbles of `reply` and say the answer was cut short."""

    reply: StoredRecord


RecoveryStep = RunTurn | SayMissed | CloseCutReply


def plan_recovery(
    records: Sequence[StoredRecord],
    *,
    scene: Scene,
    now: datetime,
    rules: AnswerRules,
    bot: BotIdentity,
) -> RecoveryStep | None:
    """What a crash left at the end of `records` (the active path, oldest first) asks for;
    `None` when the conversation is settled."""
    if not records:
        return None
    leaf = records[-1]
    age = now - leaf.created_at
    match leaf.body:
        case AssistantRecord() if leaf.message_id is not None and None in leaf.message_ids:
            return CloseCutReply(reply=leaf)
        case ToolResultsRecord() if age <= RECOVERY_ANSWER_WINDOW:
            trigger = last_member_record(records)
            return RunTurn(reply_to=trigger.message_id if trigger else None, expect_leaf=leaf.id)
        case UserRecord():
            if not any(
                should_answer(facts_of_record(body, bot), scene, rules)
                for body in unanswered(records)
                if not body.refused  # the rate limit turned it away: a restart must not let it in
            ):
                return None
            if age <= RECOVERY_ANSWER_WINDOW:
                return RunTurn(reply_to=leaf.message_id, expect_leaf=leaf.id)
            if age <= RECOVERY_NOTICE_WINDOW:
                return SayMissed(reply_to=leaf.message_id)
            return None
        case _:
            return None


def unanswered(records: Sequence[StoredRecord]) -> list[UserRecord]:
    """The member messages after the newest reply, tool step or summary, newest first."""
    waiting: list[UserRecord] = []
    for record in reversed(records):
        if isinstance(record.body, UserRecord):
            waiting.append(record.body)
        elif not isinstance(record.body, ServiceMessageRecord):
            break
    return waiting


# ---------------------------------------------------------------- acting on it


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy:
    locale: Locale
    chat_locale: Callable[[int], Locale] | None = None
    """The locale of a chat (`BOT_LOCALE=auto`); None: `locale`."""
    rules: AnswerRules
    allowed_chats: tuple[int, ...] = ()
    private_chats: PrivateChats = "allow"
    owner_id: int | None = None


SpentFor = Callable[[int, Scene, int | None], Awaitable[bool]]
"""(chat, scene, member) → whether a spend limit refuses their turns now
(`bot.agent.spend.SpendGuard.spent_for`)."""


class CrashRecovery:
    """Runs `plan_recovery` over every session once and carries the steps out."""

    def __init__(
        self,
        *,
        sessions: SessionStore,
        history: HistoryStore,
        platform_messages: PlatformMessages,
        runner: TurnRunner,
        messenger: Messenger,
        clock: Clock,
        turns: TurnScheduler,
        policy: RecoveryPolicy,
        spent_for: SpentFor | None = None,
    ) -> None:
        self.spent_for = spent_for
        """A message a spend limit turned away is not "missed" (`SayMissed` skips it)."""
        self.sessions = sessions
        self.history = history
        self.platform_messages = platform_messages
        self.runner = runner
        self.messenger = messenger
        self.clock = clock
        self.turns = turns
        self.policy = policy
        self._waiting_since: dict[tuple[int, int], datetime] = {}
        """(session, leaf) awaiting an answer at the last scan → when the scan first saw it."""
        self._recovered: set[tuple[int, int]] = set()
        """The (session, leaf) turns the scan started, while that leaf still waits."""

    async def recover(self, bot: BotIdentity) -> int:
        """Recover every session that needs it; returns how many did. Turns it starts run
        as tasks of the live path."""
        now = self.clock.now()
        recovered = 0
        for session in await self.sessions.list_sessions():
            if (
                session.active_leaf_id is None
                or session.closed  # the bot was removed from the chat: nothing goes there
                or not chat_allowed(
                    session.key.chat_id,
                    self.policy.allowed_chats,
                    self.policy.owner_id,
                    self.policy.private_chats,
                )
            ):
                continue
            try:
                if await self._recover(session, now, bot):
                    recovered += 1
            except Exception:
                log.exception("could not recover session %s", session.id)
        if recovered:
            log.info("recovered %d interrupted turn(s)", recovered)
        return recovered

    async def _recover(self, session: SessionInfo, now: datetime, bot: BotIdentity) -> bool:
        """Decide under the chat's turn lock, on a fresh read: another worker may be
        finishing (or may just have finished) this very turn."""
        async with self.turns.turn_lock(session):
            fresh = await self.sessions.find_session(session.key) or session
            records = (await self.history.load_history(fresh.id, max_records=30)).records
            step = plan_recovery(
                records, scene=fresh.scene, now=now, rules=self.policy.rules, bot=bot
            )
            match step:
                case None:
                    return False
                case RunTurn(reply_to=reply_to, expect_leaf=expect_leaf):
                    spawn_turn(
                        self.turns,
                        fresh,
                        reply_to=reply_to,
                        expect_leaf=expect_leaf,
                        trigger="recovery",
                    )
                case SayMissed(reply_to=reply_to):
                    if await self._over_budget(fresh, records[-1]):
                        return False
                    await self._say(fresh, "restarted_missed", reply_to=reply_to)
                case CloseCutReply(reply=reply):
                    await self._close_cut_reply(fresh, reply)
            return True

    async def recover_orphans(self, bot: BotIdentity, *, grace: timedelta) -> int:
        """One scan for orphaned turns (see the module docstring); returns how many turns
        it started."""
        now = self.clock.now()
        waiting: dict[tuple[int, int], SessionInfo] = {
            (session.id, session.active_leaf_id): session
            for session in await self.sessions.sessions_awaiting_answer(
                now - RECOVERY_ANSWER_WINDOW
            )
            if session.active_leaf_id is not None
            and chat_allowed(
                session.key.chat_id,
                self.policy.allowed_chats,
                self.policy.owner_id,
                self.policy.private_chats,
            )
        }
        seen = self._waiting_since
        self._waiting_since = {key: seen.get(key, now) for key in waiting}
        self._recovered &= waiting.keys()
        started = 0
        for key, session in waiting.items():
            if key in self._recovered or now - self._waiting_since[key] < grace:
                continue
            try:
                if await self._recover_orphan(session, now, bot):
                    self._recovered.add(key)
                    started += 1
            except Exception:
                log.exception("could not recover orphaned turn of session %s", session.id)
        if started:
            log.info("recovered %d orphaned turn(s)", started)
        return started

    async def _recover_orphan(self, session: SessionInfo, now: datetime, bot: BotIdentity) -> bool:
        async with try_turn_lock(self.turns, session) as held:
            if not held:  # a live turn runs (or is about to run) in this chat
                return False
            fresh = await self.sessions.find_session(session.key)
            if fresh is None or fresh.closed or fresh.active_leaf_id != session.active_leaf_id:
                return False  # answered, or moved on, since the scan's read
            records = (await self.history.load_history(fresh.id, max_records=30)).records
            step = plan_recovery(
                records, scene=fresh.scene, now=now, rules=self.policy.rules, bot=bot
            )
            if not isinstance(step, RunTurn):
                return False
            spawn_turn(
                self.turns,
                fresh,
                reply_to=step.reply_to,
                expect_leaf=step.expect_leaf,
                trigger="recovery",
            )
            return True

    async def _over_budget(self, session: SessionInfo, leaf: StoredRecord) -> bool:
        if self.spent_for is None:
            return False
        sender = leaf.body.sender.id if isinstance(leaf.body, UserRecord) else None
        return await self.spent_for(session.key.chat_id, session.scene, sender)

    async def _close_cut_reply(self, session: SessionInfo, leaf: StoredRecord) -> None:
        """A reply a crash cut short: keep the confirmed bubbles, say so once."""
        texts: list[str] = []
        trigger: int | None = None
        for mid in leaf.message_ids:
            event = (
                None
                if mid is None
                else await self.platform_messages.find_platform_message(session.key.chat_id, mid)
            )
            texts.append(event.text if event is not None else "")
            if event is not None and trigger is None:
                trigger = event.reply_to_message_id
        delivery = Delivery(message_ids=leaf.message_ids, texts=tuple(texts))
        await settle_partial_reply(self.runner.bubbles, session, leaf, delivery, reply_to=trigger)
        await self._say(session, "restarted_cut", reply_to=trigger)

    async def _say(self, session: SessionInfo, key: str, *, reply_to: int | None) -> None:
        await self.messenger.send_text(
            session.key.chat_id,
            text(
                self.policy.chat_locale(session.key.chat_id)
                if self.policy.chat_locale
                else self.policy.locale,
                key,
            ),
            thread_id=session.key.thread_id,
            reply_to=reply_to,
        )
