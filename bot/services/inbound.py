"""The inbound service: every message stored once, turns scheduled by their rules, edits.

New messages have one way in, `InboundService.on_messages`, whatever brought them: a polled
`getUpdates` batch, one webhook update (both through `adapters/telegram/polling_loop.py`'s
`handle_batch`), the demo, a test. Edits come through `on_edit`.

Every message of an allowed chat is stored exactly once (the platform message's chat +
message id is the de-duplication key, written in the same transaction as the record). When
and how turns run (one at a time per session, the merge window, messages that wait their
turn, edits) is `turn_scheduler.TurnScheduler`'s: a burst of one sender's messages inside
the merge window becomes one turn (later messages are stored with `merged`). Turns always
run as tasks (also for edits and `/retry`), so handling an update only stores it and never
waits on a turn: the poller confirms an update to Telegram after it was handled, and a slow
model in one chat never holds up another.

Hostile members and busy chats:
- Messages, commands and edits that would start work go through the same per-user and
  per-chat rate limits (`guard.RateLimiter`); the owner, checked by id, is exempt. A refusal
  is sent at most once per chat a minute.
- An edit is queued for its chat: the handler records the new text and returns. Edits of
  one message that arrive before their queued re-answer runs are coalesced: it re-answers
  once, for the last text.
- A pending turn merges only messages of its own sender. When another member addresses the
  bot while someone's turn waits out the merge window, the newcomer's message waits its
  turn: it is recorded at once as a platform message (so a retried update is not stored
  twice), the pending turn starts without waiting out the rest of its window, and the
  message joins the conversation right after that turn has answered, followed by a turn of
  its own (so does whatever the chat gets meanwhile, in order, on this worker or another:
  the worker whose messages wait holds the chat's "join" lock, which the store lock reports
  to the others). So a chat's messages are stored in Telegram's order, each addressed
  message is answered, and each turn's current message is the one it answers. A crash in
  that short gap leaves the waiting message out of the conversation (it stays a recorded
  platform message); the other workers' messages then join.

Whether a message is answered and what it is stored as are pure rules, in
`bot.services.inbound_rules`.

Crash recovery (`recovery.CrashRecovery`, once at start-up) starts its turns through the
scheduler (`turn_spawning.spawn_turn`) and answers by the same `should_answer`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from bot.agent.chat_scope import NO_SCOPES, ChatScopes
from bot.agent.runtime import TurnOutcome, TurnRunner
from bot.domain.facts import InboundMessage
from bot.domain.ids import SessionKey
from bot.domain.records import StoredRecord, UserRecord
from bot.ports import (
    ChatLock,
    InboundAppend,
    Messenger,
    RateLimits,
    SessionInfo,
    SessionRequest,
)
from bot.services.ambient import AmbientListener
from bot.services.answer_again import AnswerAgain
from bot.services.commands import Commands
from bot.services.inbound_alone import AloneMessages
from bot.services.inbound_gate import Admission, InboundGate
from bot.services.inbound_rules import (
    InboundPolicy,
    facts_of_message,
    key_of,
    platform_message_of,
    record_of,
    scene_of,
    scope_rules,
    session_title_of,
    should_answer,
)
from bot.services.private_members import PrivateMembers
from bot.services.transcripts import VoiceTranscripts
from bot.services.triggers import BotLoopGuard, compile_wake_words
from bot.services.turn_scheduler import TurnScheduler
from bot.store_ports import Claims, HistoryStore, PlatformMessages, SessionStore
from bot.texts import ChatLocales

log = logging.getLogger("tgbot.inbound")


# ------------------------------------------------------------------ the service


Round = tuple[SessionInfo, InboundMessage]
"""A message of a round, with its session."""


class InboundService:
    """Implements `bot.ports.InboundSink`."""

    def __init__(
        self,
        *,
        sessions: SessionStore,
        history: HistoryStore,
        platform_messages: PlatformMessages,
        claims: Claims,
        runner: TurnRunner,
        messenger: Messenger,
        policy: InboundPolicy,
        commands: Commands | None = None,
        chat_lock: ChatLock | None = None,
        limits: RateLimits | None = None,
        transcripts: VoiceTranscripts | None = None,
        locales: ChatLocales | None = None,
        scopes: ChatScopes = NO_SCOPES,
        ambient: AmbientListener | None = None,
        refresh_settings: Callable[[], Awaitable[None]] | None = None,
        private_members: PrivateMembers | None = None,
    ) -> None:
        self.refresh_settings = refresh_settings
        """Reloads the `/settings` changes other workers stored, when they are stale."""
        self.scopes = scopes
        """Each chat's triggers and whether the bot answers there (`[chats."<id>"]`)."""
        self.ambient = ambient
        """Unaddressed group messages the bot may answer (`ambient = "judge"`); None: never."""
        self.bot_loops = BotLoopGuard()
        """Exchanges with other bots, stopped after a few rounds (`answer_bots`)."""
        self.transcripts = transcripts
        """Voice notes transcribed before they are stored; None: never."""
        self.locales = locales or ChatLocales(fixed=policy.locale)
        """Whose language each reply is in (`BOT_LOCALE=auto`: the member's, the chat's)."""
        self.sessions = sessions
        self.history = history
        self.platform_messages = platform_messages
        self.claims = claims
        self.messenger = messenger
        self.policy = policy
        self.commands = commands
        self.turns = TurnScheduler(
            store=sessions,
            runner=runner,
            messenger=messenger,
            locale=policy.locale,
            merge_window_seconds=policy.merge_window_seconds,
            chat_lock=chat_lock,
            chat_locale=self.locales.for_chat,
        )
        """When and how turns run (what recovery starts its turns through, too)."""
        self.gate = InboundGate(
            policy=policy,
            messenger=messenger,
            locales=self.locales,
            limits=limits,
            members=private_members,
        )
        """The allow-list, the rate limits and the refusals they send."""
        self.again = AnswerAgain(
            history=history, platform_messages=platform_messages, gate=self.gate, turns=self.turns
        )
        """Edits recorded, an edited trigger answered again, and `/retry`."""
        self.alone = AloneMessages(
            history=history,
            platform_messages=platform_messages,
            claims=claims,
            gate=self.gate,
            turns=self.turns,
            commands=commands,
            answers=self._answers,
        )
        """Commands, and messages that wait their turn behind another member's."""
        self.on_chat_migrated: Callable[[int, int], Awaitable[object]] | None = None
        """Told (old chat id, new chat id) when a group becomes a supergroup, before the
        batch is stored (what is kept per chat follows it: memory facts)."""

    @property
    def outcomes(self) -> deque[TurnOutcome]:
        """The latest turn outcomes, for diagnostics and tests."""
        return self.turns.outcomes

    async def drain(self) -> None:
        """Wait until every scheduled turn has finished (tests and shutdown)."""
        await self.turns.drain()

    def cancel_running(self) -> None:
        """Cancel every scheduled turn (shutdown, after its grace)."""
        self.turns.cancel_running()

    async def open(self, message: InboundMessage) -> SessionInfo:
        session = await self.sessions.open_session(
            key_of(message),
            scene=scene_of(message, self.policy.owner_id),
            title=session_title_of(message),
        )
        return await self._name_topic(session, message)

    async def _name_topic(self, session: SessionInfo, message: InboundMessage) -> SessionInfo:
        """A topic session without a name takes the one its topic was created with."""
        if session.title is not None or not message.thread_id or not message.topic_first_name:
            return session
        return await self.sessions.open_session(
            session.key, scene=session.scene, title=message.topic_first_name
        )

    # ------------------------------------------------------------------ the rules

    async def _transcribed(self, message: InboundMessage, session: SessionInfo) -> InboundMessage:
        """The message with its voice note's transcript, when one is wanted (before it is
        stored, and before any lock: the transcript is part of the stored message)."""
        if self.transcripts is None:
            return message
        answers = self._answers(message, session)
        return await self.transcripts.transcribed(message, session, answers=answers)

    def _answers(self, message: InboundMessage, session: SessionInfo) -> bool:
        scope = self.scopes.of(message.chat_id, message.thread_id)
        if not scope.enabled:
            return False
        facts = facts_of_message(message)
        rules = (
            scope_rules(scope)
            if scope is not self.scopes.default
            else replace(self.policy.rules, answer_bots=scope.triggers.answer_bots)
        )
        if session.scene == "group" and not (
            facts.mentions_bot or facts.replies_to_bot or facts.command
        ):
            words = compile_wake_words(scope.triggers.keywords, scope.triggers.patterns)
            if words and words.match(message.text) is not None:
                facts = replace(facts, wake_word=True)
        answer = should_answer(facts, session.scene, rules)
        if answer and facts.from_bot:  # `answer_bots`: a few rounds in ten minutes at most
            return self.bot_loops.allows(message.chat_id, message.message_id, message.date)
        return answer

    # ------------------------------------------------------------------ InboundSink

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        """New messages, the one way in (a `getUpdates` batch, one webhook update, a test's
        message): each chat's in message order, no edits. A message of a chat not allowed
        is dropped (a private one told so once). The rest are stored one transaction per
        round (`append_inbound`): a round takes from every chat its messages up to and
        including the first that starts a turn, so that turn is scheduled before the
        messages after its trigger are stored, as when they arrive one by one. A command,
        or a message held back behind another member's waiting turn, goes alone
        (`AloneMessages`). Duplicates (a redelivered update) are found inside the
        transaction."""
        if self.on_chat_migrated is not None:
            for migration in {m.chat_migration for m in messages if m.chat_migration}:
                await self.on_chat_migrated(*migration)
        if self.refresh_settings is not None:
            await self.refresh_settings()
        queues, sessions = await self._open_queues(messages)
        while queues:
            # what goes alone is decided under the store locks, as `AloneMessages` decides
            # whether a message waits its turn (another request may have just scheduled one)
            async with self.turns.storing_batch([sessions[key] for key in queues]) as joining:
                batch, alone = self._next_round(queues, sessions, joining=joining)
                stored = await self._append_round(batch) if batch else []
            for (session, message), (record, admission) in zip(batch, stored, strict=True):
                await self._after_stored(session, message, record, admission)
            for session, message in alone:
                await self.alone.handle(session, message)

    async def on_message(self, message: InboundMessage) -> None:
        """One new message: `on_messages([message])`."""
        await self.on_messages((message,))

    async def _open_queues(
        self, messages: Sequence[InboundMessage]
    ) -> tuple[dict[SessionKey, deque[InboundMessage]], dict[SessionKey, SessionInfo]]:
        """The allowed messages queued by session, and their sessions, opened (one query),
        named after their topic, with voice notes transcribed."""
        queues: dict[SessionKey, deque[InboundMessage]] = {}
        requests: dict[SessionKey, SessionRequest] = {}
        for message in messages:
            self.locales.note(message)
            if not await self.gate.allowed(message):
                log.info("ignoring chat %s (not allowed)", message.chat_id)
                await self.gate.refuse_private_chat(message)
                continue
            key = key_of(message)
            queues.setdefault(key, deque()).append(message)
            earlier = requests.get(key)
            requests[key] = SessionRequest(
                key=key,
                scene=scene_of(message, self.policy.owner_id),
                # the batch's last title wins; a message that shows none keeps it
                title=session_title_of(message) or (earlier.title if earlier else None),
            )
        if not queues:
            return queues, {}
        opened = await self.sessions.open_sessions(list(requests.values()))
        sessions = dict(zip(requests, opened, strict=True))
        for key, queue in queues.items():
            if self.transcripts is not None:
                queue = queues[key] = deque(
                    [await self._transcribed(m, sessions[key]) for m in queue]
                )
            named = next((m for m in queue if m.topic_first_name), None)
            if named is not None:
                sessions[key] = await self._name_topic(sessions[key], named)
        return queues, sessions

    def _next_round(
        self,
        queues: dict[SessionKey, deque[InboundMessage]],
        sessions: dict[SessionKey, SessionInfo],
        *,
        joining: bool = False,
    ) -> tuple[list[Round], list[Round]]:
        """Take the next round from `queues` (emptied queues leave): from every chat its
        messages up to and including the first that starts a turn, or its first message
        when that one goes alone (every message, while messages wait to join: `joining`).
        Returns (stored together, alone)."""
        batch: list[Round] = []
        alone: list[Round] = []
        for key in list(queues):
            queue, session = queues[key], sessions[key]
            if joining or self._goes_alone(queue[0], session):
                alone.append((session, queue.popleft()))
            else:
                while queue and not self._goes_alone(queue[0], session):
                    message = queue.popleft()
                    batch.append((session, message))
                    if self._answers(message, session):
                        break
            if not queue:
                del queues[key]
        return batch, alone

    def _goes_alone(self, message: InboundMessage, session: SessionInfo) -> bool:
        """Whether a message goes alone (`AloneMessages`): a command, or a message held back
        behind another member's waiting turn (and what the chat gets until it joined), so
        those keep their order and their turn."""
        if message.command is not None and self.commands is not None:
            return True
        state = self.turns.known(session.id)
        if state is None:
            return False
        return state.holds_back(message.sender.id, answer=self._answers(message, session))

    async def _append_round(
        self, batch: list[Round]
    ) -> list[tuple[StoredRecord | None, Admission]]:
        """Store a round in one transaction (under its store locks); each message's record
        (None: a duplicate, or not storable, the store logged why) and admission."""
        items: list[InboundAppend] = []
        admissions: list[Admission] = []
        for session, message in batch:
            # a redelivered duplicate counts against the limit too: it is found inside the
            # transaction
            admission = await self.gate.admission(
                message, session, answer=self._answers(message, session)
            )
            admissions.append(admission)
            merged = self.turns.state(session.id).merges(message.sender.id)
            items.append(
                InboundAppend(
                    session_id=session.id,
                    record=record_of(message, merged=merged, refused=admission.refused),
                    platform_message=platform_message_of(message),
                )
            )
        stored = await self.history.append_inbound(items)
        return list(zip(stored, admissions, strict=True))

    async def _after_stored(
        self,
        session: SessionInfo,
        message: InboundMessage,
        record: StoredRecord | None,
        admission: Admission,
    ) -> None:
        """Schedule the turn a stored message starts, or tell the chat it was refused."""
        if record is None:
            return
        if admission.admitted:
            self.turns.schedule(session, message)
        elif isinstance(record.body, UserRecord) and record.body.refused:
            await self.gate.refuse(message)
        elif self.ambient is not None and session.scene == "group" and not session.closed:
            scope = self.scopes.of(message.chat_id, message.thread_id)
            if scope.enabled and scope.triggers.ambient == "judge":
                self.ambient.heard(session, message, scope, self._schedule_ambient)

    def _schedule_ambient(self, session: SessionInfo, message: InboundMessage) -> None:
        """A turn the ambient judge asked for (unaddressed: its log line says so)."""
        self.turns.schedule(session, message, trigger="ambient")

    async def on_edit(self, message: InboundMessage) -> None:
        """Record the new text and queue the re-answer for the chat (`AnswerAgain`); never
        waits on a turn. An edit of a message not stored yet (webhook workers: Telegram may
        deliver the edit first) is stored as that message, with its newest text, and
        answered when it triggers; the original, when it comes, is then a duplicate."""
        if not await self.gate.allowed(message):
            return
        session = await self.open(message)
        if not await self.again.record_edit(session, message):
            log.info(
                "edit of message %s/%s before the message: stored as the message",
                message.chat_id,
                message.message_id,
            )
            await self.on_message(message)
