"""Per-session turn scheduling: the merge window, the session locks, running a turn, and
draining at shutdown (messages that wait their turn: `bot.services.turn_joins`; edits'
re-answers, turns run at once: `bot.services.turn_spawning`).

Turns of one session are serialised by a per-session lock (and, when wired, the
cross-worker chat lock after it); storing a message takes the session's store lock. Every
turn runs as a task, so whoever schedules one never waits on it. A burst of one sender's
messages inside the merge window becomes one turn: the turn pending for that sender is
cancelled and scheduled again for the newest message. A message that addresses the bot
while another member's turn waits out its window waits its turn
(`bot.services.turn_joins.join_later`): that turn starts at once, and the message joins the
conversation after it answered, followed by a turn of its own.

The chat lock (`bot.ports.ChatLock`): `InboundService` holds a chat's lock in two scopes, so
a long turn never blocks storing the next message:

- `"store"`: around "is this message new? then append it" (the de-duplication check and
  the write, so a retried update sent to two workers is stored once, in arrival order);
- `"turn"`: around running a turn, so two workers never answer in one chat at once;
- `"join"`: held by a worker from the moment it holds back a message until its held-back
  messages joined the conversation; taking the store lock tells the other workers (in the
  same statement), whose new messages of that chat then wait too and join after, so a
  chat's messages are stored in Telegram's order across workers.

`LocalChatLock` here (per-chat asyncio locks) serves one worker on SQLite;
`storage.postgres.locks.AdvisoryChatLock` (PostgreSQL advisory locks) serves several workers on one
database. `ChatLock` and `LockScope` are declared in `bot.ports`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection
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
from bot.ports import ChatLock, LockScope, Messenger, SessionInfo
from bot.services.inbound_rules import Trigger, trigger_of
from bot.store_ports import SessionStore
from bot.texts import text

log = logging.getLogger("tgbot.inbound")

MAX_IDLE_SESSIONS = 10_000
"""Per-chat state is kept for active chats; idle entries beyond this are forgotten (they
hold nothing but unlocked locks), so memory does not grow with every chat ever seen."""


@dataclass(slots=True)
class PendingTurn:
    """A turn scheduled after the merge window, for the newest message of one sender."""

    task: asyncio.Task[None]
    sender_id: int
    reply_to: int
    started: bool = False
    hurry: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when someone else waits: the turn starts without waiting out the merge window."""


@dataclass(slots=True)
class JoinHold:
    """This worker's hold of a chat's `"join"` lock while its messages wait to join."""

    granted: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    async def wait(self) -> None:
        """Until the lock is held (or could not be taken: the messages join anyway)."""
        if self.task is None or self.granted.is_set():
            return
        granted = asyncio.ensure_future(self.granted.wait())
        try:
            await asyncio.wait({granted, self.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            granted.cancel()
        if not self.granted.is_set():
            log.warning("the chat's join lock could not be taken: joining without it")


@dataclass(slots=True)
class SessionTurns:
    """What one session's scheduling keeps: its locks, its pending turn, what waits."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    store_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: PendingTurn | None = None
    edits: dict[int, InboundMessage] = field(default_factory=dict)
    """The newest text of each edited message whose re-answer is queued (coalescing)."""
    joining: asyncio.Task[None] | None = None
    """The last deferred message still waiting to join the conversation."""
    deferred: dict[int, int] = field(default_factory=dict)
    """Senders with messages waiting to join (sender id → how many)."""
    join_hold: JoinHold | None = None
    """The chat's `"join"` lock, held while messages wait to join here."""
    tasks: int = 0
    """Turn tasks created for this session and not finished yet."""

    @property
    def idle(self) -> bool:
        return self.tasks == 0 and not self.lock.locked() and not self.store_lock.locked()

    def waiting(self) -> PendingTurn | None:
        """The pending turn, while it still waits out its merge window."""
        pending = self.pending
        return pending if pending is not None and not pending.started else None

    def merges(self, sender_id: int) -> bool:
        """Whether a message of `sender_id` joins the turn waiting for their burst."""
        waiting = self.waiting()
        return waiting is not None and waiting.sender_id == sender_id

    def holds_back(self, sender_id: int, *, answer: bool) -> bool:
        """Whether a message of `sender_id` waits its turn: it addresses the bot while
        someone else's turn waits out its merge window, or messages already wait to join
        (anyone's: the chat's messages are stored in Telegram's order)."""
        waiting = self.waiting()
        others = waiting is not None and waiting.sender_id != sender_id
        return (answer and others) or bool(self.deferred)


class TurnScheduler:
    """Runs a session's turns one at a time, as tasks (the live path's, and recovery's)."""

    def __init__(
        self,
        *,
        store: SessionStore,
        runner: TurnRunner,
        messenger: Messenger,
        locale: Locale,
        merge_window_seconds: float,
        chat_lock: ChatLock | None = None,
        chat_locale: Callable[[int], Locale] | None = None,
    ) -> None:
        self.chat_locale = chat_locale
        """The locale of a chat (`BOT_LOCALE=auto`); None: `locale`."""
        self.store = store
        self.runner = runner
        self.messenger = messenger
        self.on_scheduled: Callable[[InboundMessage], None] | None = None
        """Told of each message a turn is scheduled for, before the merge window."""
        self.locale = locale
        self.merge_window_seconds = merge_window_seconds
        self.chat_lock = chat_lock
        self._sessions: dict[int, SessionTurns] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.outcomes: deque[TurnOutcome] = deque(maxlen=100)
        """The latest turn outcomes, for diagnostics and tests."""

    # ------------------------------------------------------------------ per-session state

    def state(self, session_id: int) -> SessionTurns:
        state = self._sessions.get(session_id)
        if state is None:
            if len(self._sessions) >= MAX_IDLE_SESSIONS:
                self._forget_idle()
            state = self._sessions[session_id] = SessionTurns()
        return state

    def known(self, session_id: int) -> SessionTurns | None:
        """The session's state if it has any (without creating it)."""
        return self._sessions.get(session_id)

    def _forget_idle(self) -> None:
        for session_id in [sid for sid, st in self._sessions.items() if st.idle]:
            del self._sessions[session_id]

    # ------------------------------------------------------------------ locks

    def _chat_held(
        self, session: SessionInfo, scope: LockScope
    ) -> AbstractAsyncContextManager[None]:
        """The chat lock (`LocalChatLock` below, or advisory locks across workers), taken
        after the in-process session lock; nothing extra when no ChatLock is wired."""
        if self.chat_lock is None:
            return nullcontext()
        return self.chat_lock.hold(session.key, scope=scope)

    def _store_held(self, session: SessionInfo) -> AbstractAsyncContextManager[bool]:
        """The chat's "store" lock across workers, yielding whether messages wait to join
        there (on any worker); nothing and False when no ChatLock is wired."""
        if self.chat_lock is None:
            return nullcontext(False)
        return self.chat_lock.hold_store(session.key)

    @asynccontextmanager
    async def storing(self, session: SessionInfo) -> AsyncIterator[bool]:
        """Around "is this message new? then store it": in-process, then across workers;
        yields whether messages wait to join the chat's conversation (here or on another
        worker), which a new message then waits behind."""
        async with self.state(session.id).store_lock, self._store_held(session) as joining:
            yield joining

    @asynccontextmanager
    async def storing_batch(self, sessions: Collection[SessionInfo]) -> AsyncIterator[bool]:
        """The store locks of several sessions, in id order (no two batches deadlock). The
        cross-worker chat lock only for one session (a webhook update; a polling round of
        one chat): a batch of several chats comes from long polling, which Telegram serves
        to one consumer at a time, and one lock held per chat would hold a database
        connection each. Yields what `storing` does for one session (False for several)."""
        by_id = {session.id: session for session in sessions}
        async with AsyncExitStack() as held:
            for session_id in sorted(by_id):
                await held.enter_async_context(self.state(session_id).store_lock)
            joining = False
            if len(by_id) == 1:
                (session,) = by_id.values()
                joining = await held.enter_async_context(self._store_held(session))
            yield joining

    @asynccontextmanager
    async def turn_lock(self, session: SessionInfo) -> AsyncIterator[None]:
        """The session's turn lock: in-process first, then across workers."""
        async with self.state(session.id).lock, self._chat_held(session, "turn"):
            yield

    # ------------------------------------------------------------------ scheduling

    def schedule(
        self, session: SessionInfo, message: InboundMessage, *, trigger: Trigger | None = None
    ) -> None:
        """Answer `message` after the merge window; a later message of the same sender in
        the window takes its place (one turn answers the burst). `trigger`: what started
        the turn, when the message does not say it (`trigger_of`)."""
        started_by = trigger or trigger_of(message, session.scene)
        if self.on_scheduled is not None:
            self.on_scheduled(message)  # e.g. its images start downloading, off the lock
        state = self.state(session.id)
        if state.merges(message.sender.id):
            assert state.pending is not None
            state.pending.task.cancel()
        delay = self.merge_window_seconds
        hurry = asyncio.Event()

        async def later() -> None:
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hurry.wait(), delay)
            async with self.turn_lock(session):
                if state.pending is not None and state.pending.task is task:
                    state.pending.started = True
                try:
                    await self.run(session, reply_to=message.message_id, trigger=started_by)
                finally:
                    if state.pending is not None and state.pending.task is task:
                        state.pending = None

        task = asyncio.create_task(later(), name=f"turn-{session.id}")
        state.pending = PendingTurn(
            task=task, sender_id=message.sender.id, reply_to=message.message_id, hurry=hurry
        )
        self.track(state, task)

    async def run(
        self, session: SessionInfo, *, reply_to: int | None, trigger: Trigger | None = None
    ) -> None:
        """Run one turn now (the caller holds the turn lock); a crash is logged and the
        chat hears about it once."""
        try:
            # The runner reads the session afresh with its history (route, window).
            outcome = await self.runner.run_turn(session, reply_to=reply_to, trigger=trigger)
        except Exception:
            # A bug or a storage failure: the user still hears back, once.
            log.exception("turn crashed in session %s", session.id)
            try:
                await self.messenger.send_text(
                    session.key.chat_id,
                    text(
                        self.chat_locale(session.key.chat_id) if self.chat_locale else self.locale,
                        "internal_error",
                    ),
                    thread_id=session.key.thread_id,
                    reply_to=reply_to,
                )
            except Exception:
                log.exception("could not tell chat %s about the failure", session.key.chat_id)
            return
        self.outcomes.append(outcome)

    # ------------------------------------------------------------------ tasks

    def track(self, state: SessionTurns, task: asyncio.Task[None]) -> None:
        """Keep the task for `drain`, and the session's state while the task may use it."""
        state.tasks += 1
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            state.tasks -= 1
            self._tasks.discard(finished)

        task.add_done_callback(done)

    def cancel_running(self) -> None:
        """Cancel every scheduled turn (shutdown, after its grace): an interrupted turn is
        finished or closed by crash recovery at the next start."""
        for task in list(self._tasks):
            task.cancel()

    async def drain(self) -> None:
        """Wait until every scheduled turn has finished (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


@dataclass(slots=True)
class _LockEntry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class LocalChatLock:
    """Per-chat asyncio locks for a single worker; an entry lives only while it is used."""

    def __init__(self) -> None:
        self._entries: dict[tuple[LockScope, str, int, int], _LockEntry] = {}

    @asynccontextmanager
    async def hold(self, key: SessionKey, *, scope: LockScope = "turn") -> AsyncIterator[None]:
        name = (scope, key.platform, key.chat_id, key.thread_id)
        entry = self._entries.setdefault(name, _LockEntry())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[name]

    @asynccontextmanager
    async def try_hold(self, key: SessionKey, *, scope: LockScope = "turn") -> AsyncIterator[bool]:
        name = (scope, key.platform, key.chat_id, key.thread_id)
        if name in self._entries:  # held, or about to be
            yield False
            return
        async with self.hold(key, scope=scope):
            yield True

    @asynccontextmanager
    async def hold_store(self, key: SessionKey) -> AsyncIterator[bool]:
        async with self.hold(key, scope="store"):
            yield ("join", key.platform, key.chat_id, key.thread_id) in self._entries

    @property
    def held(self) -> int:
        """How many chats have a holder or a waiter (for tests and diagnostics)."""
        return len(self._entries)

    async def aclose(self) -> None:
        return None
