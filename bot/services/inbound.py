"""On inbound message / edit: store the conversation, decide whether to answer, run turns.

Every message of an allowed chat is stored exactly once (the platform event's chat + message
id is the de-duplication key, written in the same transaction as the record). Turns of one
session are serialised by a per-session lock; a burst of messages inside the merge window
becomes one turn (later messages are stored with `merged`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from bot.agent.runtime import TurnOutcome, TurnRunner
from bot.context.projection import record_tokens
from bot.domain.facts import InboundMessage
from bot.domain.ids import Scene, SessionKey
from bot.domain.records import EventRecord, RecordBody, UserRecord
from bot.ports import Clock, ConversationStore, Messenger, NewRecord, PlatformEvent, SessionInfo
from bot.services.guard import RateLimiter, chat_allowed
from bot.services.texts import text

log = logging.getLogger("tgbot.inbound")

Locale = Literal["zh", "en"]
CommandHandler = Callable[[InboundMessage, SessionInfo], Awaitable[bool]]
"""Handles a bot command; returns False when the command is not ours (then it is stored)."""


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


@dataclass(slots=True)
class _Pending:
    task: asyncio.Task[None]
    sender_id: int
    reply_to: int
    started: bool = False


@dataclass(slots=True)
class _SessionState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    store_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: _Pending | None = None


def scene_of(message: InboundMessage, owner_id: int | None) -> Scene:
    if message.chat_type == "private":
        return "owner" if owner_id is not None and message.sender.id == owner_id else "private"
    return "group"


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
    ) -> None:
        self.store = store
        self.runner = runner
        self.messenger = messenger
        self.clock = clock
        self.policy = policy
        self.commands = commands
        self.limiter = RateLimiter(
            per_user=policy.user_messages_per_minute, per_chat=policy.chat_messages_per_minute
        )
        self._sessions: dict[int, _SessionState] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.outcomes: deque[TurnOutcome] = deque(maxlen=100)
        """The latest turn outcomes, for diagnostics and tests."""

    def _state(self, session_id: int) -> _SessionState:
        return self._sessions.setdefault(session_id, _SessionState())

    async def open(self, message: InboundMessage) -> SessionInfo:
        key = SessionKey(chat_id=message.chat_id, thread_id=message.thread_id)
        return await self.store.open_session(
            key, scene=scene_of(message, self.policy.owner_id), title=message.chat_title
        )

    # ------------------------------------------------------------------ InboundSink

    async def on_message(self, message: InboundMessage) -> None:
        if not chat_allowed(message.chat_id, self.policy.allowed_chats):
            log.info("ignoring chat %s (not in the allow-list)", message.chat_id)
            return
        session = await self.open(message)
        if message.command and self.commands is not None:
            if message.update_id is not None and not await self.store.claim_update(
                message.update_id
            ):
                return
            if await self.commands(message, session):
                return
        state = self._state(session.id)
        async with state.store_lock:
            if await self.store.find_event(message.chat_id, message.message_id) is not None:
                log.info("duplicate message %s/%s", message.chat_id, message.message_id)
                return
            answer = self._should_answer(message, session.scene)
            pending = state.pending
            merged = (
                pending is not None
                and not pending.started
                and pending.sender_id == message.sender.id
            )
            await self._store_inbound(session, message, merged=merged)
        if not answer or message.event is not None:
            return
        if not self.limiter.allow(
            user_id=message.sender.id, chat_id=message.chat_id, now=time.monotonic()
        ):
            if self.limiter.should_warn(message.chat_id, time.monotonic()):
                await self.messenger.send_text(
                    message.chat_id,
                    text(self.policy.locale, "rate_limited"),
                    thread_id=message.thread_id,
                    reply_to=message.message_id,
                )
            return
        self._schedule_turn(session, state, message)

    async def on_edit(self, message: InboundMessage) -> None:
        if not chat_allowed(message.chat_id, self.policy.allowed_chats):
            return
        session = await self.open(message)
        state = self._state(session.id)
        async with state.store_lock:
            known = await self.store.find_event(message.chat_id, message.message_id)
            await self.store.record_events([_event_of(message, record_id=None, known=known)])
        async with state.lock:
            loaded = await self.store.load_history(session.id, max_records=200)
            last_user = next(
                (r for r in reversed(loaded.records) if isinstance(r.body, UserRecord)), None
            )
            if last_user is None or last_user.message_id != message.message_id:
                return
            answered = any(r.kind == "assistant" for r in loaded.records if r.id > last_user.id)
            if not answered:
                return
            body = self._body(message, merged=False)
            assert isinstance(body, UserRecord)
            await self.store.append(
                session.id,
                [
                    NewRecord(
                        body=body,
                        created_at=message.date,
                        message_ids=(message.message_id,),
                        tokens=record_tokens(body),
                    )
                ],
                parent_id=last_user.parent_id,
            )
            await self._run(session, reply_to=message.message_id)

    async def retry(self, session: SessionInfo) -> bool:
        """Regenerate the last answer on a new branch; False when there is nothing to retry."""
        state = self._state(session.id)
        async with state.lock:
            loaded = await self.store.load_history(session.id, max_records=200)
            last_user = next(
                (r for r in reversed(loaded.records) if isinstance(r.body, UserRecord)), None
            )
            if last_user is None:
                return False
            await self.store.set_active_leaf(session.id, last_user.id)
            await self._run(session, reply_to=last_user.message_id)
        return True

    async def drain(self) -> None:
        """Wait until every scheduled turn has finished (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ------------------------------------------------------------------ internals

    def _should_answer(self, message: InboundMessage, scene: Scene) -> bool:
        if message.sender.is_bot and message.sender.kind == "bot":
            return False  # never answer bots: two bots could talk forever
        if scene != "group":
            return message.event is None
        p = self.policy
        return (
            (p.answer_on_mention and message.mentions_bot)
            or (p.answer_on_reply and message.replies_to_bot)
            or (p.answer_on_command and message.command is not None)
        )

    def _body(self, message: InboundMessage, *, merged: bool) -> RecordBody:
        if message.event is not None:
            return EventRecord(text=message.event, actor=message.sender)
        return UserRecord(
            sender=message.sender,
            text=message.text,
            media=message.media,
            quote=message.quote,
            forward=message.forward,
            merged=merged,
        )

    async def _store_inbound(
        self, session: SessionInfo, message: InboundMessage, *, merged: bool
    ) -> None:
        body = self._body(message, merged=merged)
        await self.store.append(
            session.id,
            [
                NewRecord(
                    body=body,
                    created_at=message.date,
                    message_ids=(message.message_id,),
                    tokens=record_tokens(body),
                )
            ],
            events=[_event_of(message, record_id=None, known=None)],
        )

    def _schedule_turn(
        self, session: SessionInfo, state: _SessionState, message: InboundMessage
    ) -> None:
        if state.pending is not None and not state.pending.started:
            state.pending.task.cancel()
        delay = self.policy.merge_window_seconds

        async def later() -> None:
            if delay > 0:
                await asyncio.sleep(delay)
            async with state.lock:
                if state.pending is not None and state.pending.task is task:
                    state.pending.started = True
                try:
                    await self._run(session, reply_to=message.message_id)
                finally:
                    if state.pending is not None and state.pending.task is task:
                        state.pending = None

        task = asyncio.create_task(later(), name=f"turn-{session.id}")
        state.pending = _Pending(
            task=task, sender_id=message.sender.id, reply_to=message.message_id
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, session: SessionInfo, *, reply_to: int | None) -> None:
        fresh = await self.store.find_session(session.key) or session
        try:
            outcome = await self.runner.run_turn(fresh, reply_to=reply_to)
        except Exception:
            log.exception("turn crashed in session %s", session.id)
            return
        self.outcomes.append(outcome)


def _event_of(
    message: InboundMessage, *, record_id: int | None, known: PlatformEvent | None
) -> PlatformEvent:
    return PlatformEvent(
        chat_id=message.chat_id,
        thread_id=message.thread_id,
        message_id=message.message_id,
        sender_id=message.sender.id,
        sender_name=message.sender.name,
        is_bot=message.sender.is_bot,
        date=known.date if known is not None else message.date,
        text=message.text if message.event is None else message.event,
        media=message.media,
        reply_to_message_id=message.quote.id if message.quote is not None else None,
        record_id=known.record_id if known is not None else record_id,
        edited_at=message.edit_date if message.is_edit else None,
    )
