"""On inbound message / edit: store the conversation, decide whether to answer, run turns.

Every message of an allowed chat is stored exactly once (the platform message's chat + message
id is the de-duplication key, written in the same transaction as the record). Turns of one
session are serialised by a per-session lock; a burst of one sender's messages inside the
merge window becomes one turn (later messages are stored with `merged`). Turns always run
as tasks (also for edits and `/retry`), so handling an update only stores it and never
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
  its own (so does whatever its sender writes meanwhile, in order). So each addressed
  message is answered, and each turn's current message is the one it answers. A crash in
  that short gap leaves the waiting message out of the conversation (it stays a recorded
  platform message).

Crash recovery (`recover_interrupted`, once at start-up) lives in `recovery.py`; which
messages are answered, live or after a crash, is decided by `triggers.should_answer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
)
from dataclasses import dataclass, field

from bot.agent.runtime import TurnOutcome, TurnRunner
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale, SessionKey
from bot.domain.records import UserRecord
from bot.errors import StorageUnavailable
from bot.ports import (
    ChatLock,
    Clock,
    CommandHandler,
    ConversationStore,
    InboundAppend,
    LockScope,
    Messenger,
    RateLimits,
    SessionInfo,
    SessionRequest,
)
from bot.services.guard import LocalRateLimits, RateLimiter, chat_allowed, is_owner
from bot.services.message_records import (
    platform_message_of,
    record_of,
    scene_of,
    session_title_of,
)
from bot.services.recovery import CrashRecovery, RecoveryPolicy
from bot.services.triggers import AnswerRules, BotIdentity, facts_of_message, should_answer
from bot.texts import text

log = logging.getLogger("tgbot.inbound")


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundPolicy:
    owner_id: int | None
    locale: Locale = "zh"
    answer_on_mention: bool = True
    answer_on_reply: bool = True
    answer_on_command: bool = True
    merge_window_seconds: float = 1.5
    allowed_chats: tuple[int, ...] = ()
    user_messages_per_minute: int = 20
    chat_messages_per_minute: int = 60

    @property
    def rules(self) -> AnswerRules:
        return AnswerRules(
            on_mention=self.answer_on_mention,
            on_reply=self.answer_on_reply,
            on_command=self.answer_on_command,
        )


@dataclass(slots=True)
class _Pending:
    task: asyncio.Task[None]
    sender_id: int
    reply_to: int
    started: bool = False
    hurry: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when someone else waits: the turn starts without waiting out the merge window."""


@dataclass(slots=True)
class _SessionState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    store_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: _Pending | None = None
    edits: dict[int, InboundMessage] = field(default_factory=dict)
    """The newest text of each edited message whose re-answer is queued (coalescing)."""
    joining: asyncio.Task[None] | None = None
    """The last deferred message still waiting to join the conversation."""
    deferred: dict[int, int] = field(default_factory=dict)
    """Senders with messages waiting to join (sender id → how many)."""
    tasks: int = 0
    """Turn tasks created for this session and not finished yet."""

    @property
    def idle(self) -> bool:
        return self.tasks == 0 and not self.lock.locked() and not self.store_lock.locked()


MAX_IDLE_SESSIONS = 10_000
"""Per-chat state is kept for active chats; idle entries beyond this are forgotten (they
hold nothing but unlocked locks), so memory does not grow with every chat ever seen."""


class InboundService:
    """Implements `bot.ports.InboundSink`."""

    def __init__(
        self,
        *,
        store: ConversationStore,
        runner: TurnRunner,
        messenger: Messenger,
        clock: Clock,
        policy: InboundPolicy,
        commands: CommandHandler | None = None,
        chat_lock: ChatLock | None = None,
        limits: RateLimits | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.messenger = messenger
        self.clock = clock
        self.policy = policy
        self.commands = commands
        self.chat_lock = chat_lock
        self.limiter = RateLimiter(
            per_user=policy.user_messages_per_minute, per_chat=policy.chat_messages_per_minute
        )
        self.limits: RateLimits = limits or LocalRateLimits(self.limiter)
        """In this process (`limiter`), or shared by the workers of one PostgreSQL database."""
        self._sessions: dict[int, _SessionState] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.outcomes: deque[TurnOutcome] = deque(maxlen=100)
        """The latest turn outcomes, for diagnostics and tests."""

    def _state(self, session_id: int) -> _SessionState:
        state = self._sessions.get(session_id)
        if state is None:
            if len(self._sessions) >= MAX_IDLE_SESSIONS:
                self._forget_idle()
            state = self._sessions[session_id] = _SessionState()
        return state

    def _forget_idle(self) -> None:
        for session_id in [sid for sid, st in self._sessions.items() if st.idle]:
            del self._sessions[session_id]

    async def open(self, message: InboundMessage) -> SessionInfo:
        key = SessionKey(chat_id=message.chat_id, thread_id=message.thread_id)
        session = await self.store.open_session(
            key, scene=scene_of(message, self.policy.owner_id), title=session_title_of(message)
        )
        return await self._name_topic(session, message)

    async def _name_topic(self, session: SessionInfo, message: InboundMessage) -> SessionInfo:
        """A topic session without a name takes the one its topic was created with."""
        if session.title is not None or not message.thread_id or not message.topic_first_name:
            return session
        return await self.store.open_session(
            session.key, scene=session.scene, title=message.topic_first_name
        )

    # ------------------------------------------------------------------ InboundSink

    def _allowed(self, chat_id: int) -> bool:
        return chat_allowed(chat_id, self.policy.allowed_chats, self.policy.owner_id)

    async def on_message(self, message: InboundMessage) -> None:
        if not self._allowed(message.chat_id):
            log.info("ignoring chat %s (not in the allow-list)", message.chat_id)
            return
        session = await self.open(message)
        if message.command and self.commands is not None and self.commands.handles(message):
            if message.update_id is not None and not await self.store.claim_update(
                message.update_id
            ):
                return
            # commands start work too (/retry a whole turn, /help a post): same limits
            if not await self._admit(message):
                return
            if await self.commands(message, session):
                return
        state = self._state(session.id)
        async with state.store_lock, self._chat_held(session, "store"):
            if (
                await self.store.find_platform_message(message.chat_id, message.message_id)
                is not None
            ):
                log.info("duplicate message %s/%s", message.chat_id, message.message_id)
                return
            answer = should_answer(facts_of_message(message), session.scene, self.policy.rules)
            pending = state.pending
            waiting = pending is not None and not pending.started
            merged = waiting and pending is not None and pending.sender_id == message.sender.id
            # someone else's turn waits out its merge window: this message waits its turn
            # (and so does whatever its sender writes until it joined, to keep their order)
            defer = (answer and waiting and not merged) or message.sender.id in state.deferred
            # closed: the bot was removed from the chat; what was said is stored, nothing is
            # sent. The limit is checked before storing, so a refusal is stored as one (and
            # crash recovery never answers it).
            wanted = answer and not session.closed
            admitted = wanted and await self._within_limits(message)
            refused = wanted and not admitted
            if defer:
                await self.store.record_platform_messages([platform_message_of(message)])
                if pending is not None:
                    pending.hurry.set()  # keep the wait (and the unstored gap) short
            else:
                await self._store_inbound(session, message, merged=merged, refused=refused)
        if refused:
            await self._refuse(message)
        if defer:
            self._join_later(session, state, message, answer=admitted, refused=refused)
        elif admitted:
            self._schedule_turn(session, state, message)

    async def on_batch(self, messages: Sequence[InboundMessage]) -> None:
        """New messages of one `getUpdates` batch (no edits), each chat's in message order:
        stored like `on_message` stores them, but one transaction per round
        (`append_inbound`) instead of one per message. A round takes from every chat its
        messages up to and including the first that starts a turn, so that turn is
        scheduled before the messages after its trigger are stored, as when they arrive one
        by one; a command at the head of a chat's queue goes alone through `on_message`.
        Duplicates (a redelivered batch) are found inside the transaction.

        Only the in-process session lock is taken, not the cross-worker chat lock: batches
        come from long polling, which Telegram serves to one consumer at a time."""
        queues: dict[SessionKey, deque[InboundMessage]] = {}
        requests: dict[SessionKey, SessionRequest] = {}
        for message in messages:
            if not self._allowed(message.chat_id):
                log.info("ignoring chat %s (not in the allow-list)", message.chat_id)
                continue
            key = SessionKey(chat_id=message.chat_id, thread_id=message.thread_id)
            queues.setdefault(key, deque()).append(message)
            earlier = requests.get(key)
            requests[key] = SessionRequest(
                key=key,
                scene=scene_of(message, self.policy.owner_id),
                # the batch's last title wins; a message that shows none keeps it
                title=session_title_of(message) or (earlier.title if earlier else None),
            )
        if not queues:
            return
        opened = await self.store.open_sessions(list(requests.values()))
        sessions = dict(zip(requests, opened, strict=True))
        for key, queue in queues.items():
            named = next((m for m in queue if m.topic_first_name), None)
            if named is not None:
                sessions[key] = await self._name_topic(sessions[key], named)
        while queues:
            batch: list[tuple[SessionInfo, InboundMessage]] = []
            alone: list[InboundMessage] = []
            for key in list(queues):
                queue, session = queues[key], sessions[key]
                if self._goes_alone(queue[0], session):
                    alone.append(queue.popleft())
                else:
                    while queue and not self._goes_alone(queue[0], session):
                        message = queue.popleft()
                        batch.append((session, message))
                        if self._answers(message, session):
                            break
                if not queue:
                    del queues[key]
            if batch:
                await self._store_batch(batch)
            for message in alone:
                await self._alone(message)

    async def _alone(self, message: InboundMessage) -> None:
        """One batched message through `on_message`; a bug there is logged with its update
        and does not fail the batch (the poller would handle every other update again)."""
        try:
            await self.on_message(message)
        except StorageUnavailable:
            raise
        except Exception:
            log.exception("handling update %s failed", message.update_id)

    def _goes_alone(self, message: InboundMessage, session: SessionInfo) -> bool:
        """Whether a batched message takes the one-by-one path of `on_message`: a command,
        or a message `on_message` holds back behind another member's waiting turn (and what
        its sender writes until it joined), so those keep their order and their turn."""
        if message.command is not None and self.commands is not None:
            return True
        state = self._sessions.get(session.id)
        if state is None:
            return False
        if message.sender.id in state.deferred:
            return True
        pending = state.pending
        waiting = pending is not None and not pending.started
        others = pending is not None and pending.sender_id != message.sender.id
        return waiting and others and self._answers(message, session)

    def _answers(self, message: InboundMessage, session: SessionInfo) -> bool:
        return should_answer(facts_of_message(message), session.scene, self.policy.rules)

    async def _store_batch(self, batch: list[tuple[SessionInfo, InboundMessage]]) -> None:
        states = {session.id: self._state(session.id) for session, _ in batch}
        async with AsyncExitStack() as held:
            for session_id in sorted(states):
                await held.enter_async_context(states[session_id].store_lock)
            items: list[InboundAppend] = []
            admitted: list[bool] = []
            for session, message in batch:
                wanted = self._answers(message, session) and not session.closed
                # checked before storing, so a refusal is stored as one (a redelivered
                # duplicate counts against the limit too: it is found inside the transaction)
                admitted.append(wanted and await self._within_limits(message))
                refused = wanted and not admitted[-1]
                pending = states[session.id].pending
                merged = (
                    pending is not None
                    and not pending.started
                    and pending.sender_id == message.sender.id
                )
                items.append(
                    InboundAppend(
                        session_id=session.id,
                        record=record_of(message, merged=merged, refused=refused),
                        platform_message=platform_message_of(message),
                    )
                )
            stored = await self.store.append_inbound(items)
        for (session, message), record, admit in zip(batch, stored, admitted, strict=True):
            # None: a duplicate, or not storable (the store logged why)
            if record is None:
                continue
            if admit:
                self._schedule_turn(session, states[session.id], message)
            elif isinstance(record.body, UserRecord) and record.body.refused:
                await self._refuse(message)

    async def on_edit(self, message: InboundMessage) -> None:
        """Record the new text and queue the re-answer for the chat; never waits on a turn."""
        if not self._allowed(message.chat_id):
            return
        session = await self.open(message)
        state = self._state(session.id)
        async with state.store_lock, self._chat_held(session, "store"):
            known = await self.store.find_platform_message(message.chat_id, message.message_id)
            await self.store.record_platform_messages([platform_message_of(message, known=known)])
        queued = message.message_id in state.edits
        state.edits[message.message_id] = message  # the queued re-answer takes the last text
        if queued:
            return
        task = asyncio.create_task(
            self._reanswer_edit(session, state, message.message_id), name=f"edit-{session.id}"
        )
        self._track(state, task)

    async def _reanswer_edit(
        self, session: SessionInfo, state: _SessionState, message_id: int
    ) -> None:
        """Re-answer an edited trigger on a new branch, once for a burst of its edits."""
        if self.policy.merge_window_seconds > 0:
            await asyncio.sleep(self.policy.merge_window_seconds)
        async with state.lock, self._chat_held(session, "turn"):
            message = state.edits.pop(message_id, None)
            if message is None:
                return
            loaded = await self.store.load_history(session.id, max_records=200)
            last_user = next(
                (r for r in reversed(loaded.records) if isinstance(r.body, UserRecord)), None
            )
            if last_user is None or last_user.message_id != message.message_id:
                return
            answered = any(r.kind == "assistant" for r in loaded.records if r.id > last_user.id)
            if not answered:
                return
            if not await self._admit(message):
                return
            await self.store.append(
                session.id,
                [record_of(message, merged=False)],
                parent_id=last_user.parent_id,
                at_root=last_user.parent_id is None,
            )
            await self._run(session, reply_to=message.message_id)

    async def retry(self, session: SessionInfo, requester_id: int) -> bool:
        """Regenerate the last answer on a new branch; False when there is nothing to retry.
        The new answer comes from a scheduled turn (`drain` waits for it).

        Only the requester's own last turn: when the chat's last message is someone else's
        (the owner's, say), there is nothing for them to retry. The regenerated turn answers
        the requester's message, so its tools act with the requester's rights, never with
        those of whoever spoke last."""
        loaded = await self.store.load_history(session.id, max_records=200)
        last_user = next(
            (r for r in reversed(loaded.records) if isinstance(r.body, UserRecord)), None
        )
        if last_user is None:
            return False
        assert isinstance(last_user.body, UserRecord)
        if last_user.body.sender.id != requester_id:
            log.info("refused /retry of another member's turn from %s", requester_id)
            return False
        self.spawn_turn(session, reply_to=last_user.message_id, leaf=last_user.id)
        return True

    async def recover_interrupted(self, *, bot_id: int | None, bot_username: str | None) -> int:
        """Finish or close the turns a crash interrupted (`recovery.py`); returns how many
        sessions needed it. Turns it starts run as tasks (`drain` waits)."""
        recovery = CrashRecovery(
            store=self.store,
            runner=self.runner,
            messenger=self.messenger,
            clock=self.clock,
            turns=self,
            policy=RecoveryPolicy(
                locale=self.policy.locale,
                rules=self.policy.rules,
                allowed_chats=self.policy.allowed_chats,
                owner_id=self.policy.owner_id,
            ),
        )
        return await recovery.recover(BotIdentity(id=bot_id, username=bot_username))

    def cancel_running(self) -> None:
        """Cancel every scheduled turn (shutdown, after its grace): an interrupted turn is
        finished or closed by crash recovery at the next start."""
        for task in list(self._tasks):
            task.cancel()

    async def drain(self) -> None:
        """Wait until every scheduled turn has finished (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ------------------------------------------------------------------ scale-out hook

    def _chat_held(
        self, session: SessionInfo, scope: LockScope
    ) -> AbstractAsyncContextManager[None]:
        """The cross-worker chat lock (bot/services/chat_lock.py), taken after the in-process
        session lock; nothing extra when no ChatLock is wired."""
        if self.chat_lock is None:
            return nullcontext()
        return self.chat_lock.hold(session.key, scope=scope)

    @asynccontextmanager
    async def turn_lock(self, session: SessionInfo) -> AsyncIterator[None]:
        """The session's turn lock: in-process first, then across workers."""
        async with self._state(session.id).lock, self._chat_held(session, "turn"):
            yield

    # ------------------------------------------------------------------ internals

    async def _admit(self, message: InboundMessage) -> bool:
        """Whether the sender may start work now (the owner always); a refusal is sent at
        most once per chat a minute."""
        if await self._within_limits(message):
            return True
        await self._refuse(message)
        return False

    async def _within_limits(self, message: InboundMessage) -> bool:
        """Whether the sender may start work now (the owner always: a rule, so it holds on
        every worker); counts it if so."""
        if is_owner(message.sender, self.policy.owner_id):
            return True
        return await self.limits.take(user_id=message.sender.id, chat_id=message.chat_id)

    async def _refuse(self, message: InboundMessage) -> None:
        """Log a refusal and tell the chat, at most once a minute."""
        log.info("rate limit: %s in chat %s", message.sender.id, message.chat_id)
        if await self.limits.warn_once(message.chat_id):
            await self.messenger.send_text(
                message.chat_id,
                text(self.policy.locale, "rate_limited"),
                thread_id=message.thread_id,
                reply_to=message.message_id,
            )

    def _join_later(
        self,
        session: SessionInfo,
        state: _SessionState,
        message: InboundMessage,
        *,
        answer: bool,
        refused: bool,
    ) -> None:
        """Add `message` to the conversation once the turns pending for other senders have
        answered (and after the messages deferred before it), then give it a turn."""
        previous = state.joining
        sender = message.sender.id
        state.deferred[sender] = state.deferred.get(sender, 0) + 1

        async def join() -> None:
            try:
                if previous is not None:
                    await asyncio.wait([previous])
                while (
                    (pending := state.pending) is not None
                    and pending.sender_id != sender
                    and not pending.task.done()
                ):
                    await asyncio.wait([pending.task])
                async with state.store_lock, self._chat_held(session, "store"):
                    await self._store_inbound(session, message, merged=False, refused=refused)
            finally:
                left = state.deferred.pop(sender, 1) - 1
                if left:
                    state.deferred[sender] = left
            if answer:
                self._schedule_turn(session, state, message)

        task = asyncio.create_task(join(), name=f"join-{session.id}")
        state.joining = task

        def forget(finished: asyncio.Task[None]) -> None:
            if state.joining is finished:
                state.joining = None

        task.add_done_callback(forget)
        self._track(state, task)

    async def _say(self, session: SessionInfo, key: str, *, reply_to: int | None) -> None:
        await self.messenger.send_text(
            session.key.chat_id,
            text(self.policy.locale, key),
            thread_id=session.key.thread_id,
            reply_to=reply_to,
        )

    def spawn_turn(
        self,
        session: SessionInfo,
        *,
        reply_to: int | None,
        leaf: int | None = None,
        expect_leaf: int | None = None,
    ) -> None:
        """Run a turn now (no merge window) as a task, under the session's locks; with
        `leaf`, on a new branch from that record (`/retry`); with `expect_leaf`, only if
        nothing was added to the conversation since (recovery: another worker may have
        answered in between)."""
        state = self._state(session.id)

        async def turn() -> None:
            async with state.lock, self._chat_held(session, "turn"):
                if expect_leaf is not None:
                    current = await self.store.find_session(session.key)
                    if current is None or current.active_leaf_id != expect_leaf:
                        return
                if leaf is not None:
                    await self.store.set_active_leaf(session.id, leaf)
                await self._run(session, reply_to=reply_to)

        self._track(state, asyncio.create_task(turn(), name=f"turn-{session.id}"))

    def _track(self, state: _SessionState, task: asyncio.Task[None]) -> None:
        """Keep the task for `drain`, and the session's state while the task may use it."""
        state.tasks += 1
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            state.tasks -= 1
            self._tasks.discard(finished)

        task.add_done_callback(done)

    async def _store_inbound(
        self, session: SessionInfo, message: InboundMessage, *, merged: bool, refused: bool
    ) -> None:
        await self.store.append(
            session.id,
            [record_of(message, merged=merged, refused=refused)],
            platform_messages=[platform_message_of(message)],
        )

    def _schedule_turn(
        self, session: SessionInfo, state: _SessionState, message: InboundMessage
    ) -> None:
        pending = state.pending
        if pending is not None and not pending.started and pending.sender_id == message.sender.id:
            pending.task.cancel()  # the sender's burst: one turn answers it all
        delay = self.policy.merge_window_seconds

        hurry = asyncio.Event()

        async def later() -> None:
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hurry.wait(), delay)
            async with state.lock, self._chat_held(session, "turn"):
                if state.pending is not None and state.pending.task is task:
                    state.pending.started = True
                try:
                    await self._run(session, reply_to=message.message_id)
                finally:
                    if state.pending is not None and state.pending.task is task:
                        state.pending = None

        task = asyncio.create_task(later(), name=f"turn-{session.id}")
        state.pending = _Pending(
            task=task, sender_id=message.sender.id, reply_to=message.message_id, hurry=hurry
        )
        self._track(state, task)

    async def _run(self, session: SessionInfo, *, reply_to: int | None) -> None:
        try:
            # The runner reads the session afresh with its history (route, window).
            outcome = await self.runner.run_turn(session, reply_to=reply_to)
        except Exception:
            # A bug or a storage failure: the user still hears back, once.
            log.exception("turn crashed in session %s", session.id)
            try:
                await self._say(session, "internal_error", reply_to=reply_to)
            except Exception:
                log.exception("could not tell chat %s about the failure", session.key.chat_id)
            return
        self.outcomes.append(outcome)
