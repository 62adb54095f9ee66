"""A reply on its way to the chat: shown while it is made, stored as it is sent.

While the turn runs, "typing…" shows for as long as it runs. Telegram shows a chat action
for about five seconds, so `Presence` sends `typing` once the turn has run `GRACE_SECONDS`
and again every `RENEW_SECONDS` while it runs (model calls and tool rounds alike), in the
turn's thread. A turn answered within the grace shows no typing at all: its reply is the
sign of life, and an indicator that would flash for a moment costs a Bot API call (the
design asks for typing within 1 s of a turn starting). One timer per turn, and a small
task once it fires; `stop()` ends it before the reply goes out, so no action ever follows
the reply (an action in flight is let finish, not cut off, so its request cannot reach
Telegram after the reply's). A failed action is logged and the turn goes on: typing is a
courtesy.

In private chats a streaming provider's growing text is previewed with a `Draft`
(`sendMessageDraft`, in `bot.agent.drafts`); `Presence` makes one per reply and turns
drafts off for a chat that refused one.

As it is sent, a reply is stored bubble by bubble, as Telegram confirms each one
(`ReplyBubbles`). The first confirmed bubble appends the assistant record (the whole
planned text, one slot per bubble, unconfirmed slots `None`) with its platform message;
each later bubble fills its slot (`set_message_ids`) and adds its platform message. So a
crash in the middle of a reply leaves every confirmed bubble stored, and the `None` slots
tell start-up recovery that the reply was cut short. When delivery stops at a failure
instead, the record is replaced by a sibling holding only the delivered bubbles
(`bot.agent.partial_reply.settle_partial_reply`): undelivered text is never stored as sent.

See docs/architecture.md, A turn's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol, runtime_checkable

from bot.agent.drafts import Draft, DraftSender
from bot.agent.partial_reply import settle_partial_reply
from bot.context.projection import record_tokens
from bot.domain.messages import Reasoning
from bot.domain.platform_messages import Delivery, PlatformMessage
from bot.domain.records import AssistantRecord, StoredRecord
from bot.ports import Clock, Messenger, NewRecord, SessionInfo
from bot.store_ports import HistoryStore, PlatformMessages

log = logging.getLogger("tgbot.presence")

GRACE_SECONDS = 0.5
"""A turn that has run this long shows typing (well inside the 1 s the design allows)."""
RENEW_SECONDS = 4.0
"""Under Telegram's five seconds, so the indicator never lapses between renewals."""
ACTION_TIMEOUT_SECONDS = 5.0
"""One action never holds the reply back longer than this."""


@runtime_checkable
class ChatActions(Protocol):
    """Shows a chat action (typing) in a chat or one of its topics."""

    async def send_typing(self, chat_id: int, *, thread_id: int = 0) -> None: ...


class Typing:
    """The typing loop of one turn."""

    def __init__(
        self, actions: ChatActions, chat_id: int, thread_id: int, *, renew: float, grace: float
    ) -> None:
        self._actions = actions
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._renew = renew
        self._grace = grace
        self._stopped = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._grace <= 0:
            self._begin()
        else:
            self._timer = asyncio.get_running_loop().call_later(self._grace, self._begin)

    def _begin(self) -> None:
        self._timer = None
        if not self._stopped.is_set():
            self._task = asyncio.create_task(self._loop(), name=f"typing:{self._chat_id}")

    async def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                await asyncio.wait_for(
                    self._actions.send_typing(self._chat_id, thread_id=self._thread_id),
                    ACTION_TIMEOUT_SECONDS,
                )
            except Exception as exc:  # a courtesy: the turn goes on without it
                log.info("typing in chat %s failed: %s", self._chat_id, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self._renew)

    async def stop(self) -> None:
        """End the loop; returns once no action is in flight (idempotent)."""
        self._stopped.set()
        self._drop_timer()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await task

    def cancel(self) -> None:
        self._stopped.set()
        self._drop_timer()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _drop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Presence:
    """Starts a `Typing` per turn, and a `Draft` per reply in private chats; without
    `actions` (a platform without them) it is idle."""

    def __init__(
        self,
        actions: ChatActions | None,
        *,
        renew: float = RENEW_SECONDS,
        grace: float = GRACE_SECONDS,
        drafts: bool = True,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._actions = actions
        self._renew = renew
        self._grace = grace
        self._drafts: DraftSender | None = (
            actions if drafts and isinstance(actions, DraftSender) else None
        )
        """Where drafts go (checked once: a protocol check costs microseconds per reply)."""
        self._monotonic = monotonic
        self._refused: set[int] = set()
        """Chats where Telegram refused a draft: typing only from then on."""

    def draft(self, chat_id: int, thread_id: int, *, private: bool) -> Draft | None:
        """A live draft for the next reply, or `None` (a group, drafts off, or refused)."""
        if not private or self._drafts is None or chat_id in self._refused:
            return None
        return Draft(
            self._drafts,
            chat_id,
            thread_id,
            monotonic=self._monotonic,
            on_refused=self._refused.add,
        )

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: int, thread_id: int = 0) -> AsyncIterator[Typing | None]:
        """Typing for the block; the block calls `stop()` before it sends its reply. Leaving
        the block (a cancelled turn too) ends the loop."""
        if self._actions is None:
            yield None
            return
        typing = Typing(self._actions, chat_id, thread_id, renew=self._renew, grace=self._grace)
        typing.start()
        try:
            yield typing
        except BaseException:
            typing.cancel()
            raise
        else:
            await typing.stop()


def chat_actions_of(messenger: object) -> ChatActions | None:
    """The messenger as `ChatActions`, when it can show them."""
    return messenger if isinstance(messenger, ChatActions) else None


class ReplyBubbles:
    """Delivers the bot's replies through `messenger` and stores their bubbles: records in
    `store`, platform messages in `platform_messages`, stamped with `clock` and the bot's
    identity."""

    def __init__(
        self,
        *,
        messenger: Messenger,
        store: HistoryStore,
        platform_messages: PlatformMessages,
        clock: Clock,
        bot_id: int | None,
        bot_name: str,
    ) -> None:
        self.messenger = messenger
        self.store = store
        self.platform_messages = platform_messages
        self.clock = clock
        self.bot_id = bot_id
        self.bot_name = bot_name

    def recorder(
        self,
        session: SessionInfo,
        reply_to: int | None,
        text: str,
        reasoning: Reasoning | None = None,
    ) -> BubbleRecorder:
        """A recorder for one reply of `text` (`Messenger.send_text(on_bubble=...)`), stored
        with the model's `reasoning` (sent back by the provider's rule, never shown)."""
        return BubbleRecorder(self, session, reply_to, text, reasoning)

    def bubble_messages(
        self,
        session: SessionInfo,
        delivery: Delivery,
        *,
        reply_to: int | None,
        record_id: int | None,
        slots: range | None = None,
    ) -> list[PlatformMessage]:
        """Platform messages of the confirmed bubbles of `delivery` (only `slots` if given)."""
        return delivery.platform_messages(
            chat_id=session.key.chat_id,
            thread_id=session.key.thread_id,
            sender_id=self.bot_id,
            sender_name=self.bot_name,
            reply_to=reply_to,
            now=self.clock.now(),
            record_id=record_id,
            slots=slots,
        )


class BubbleRecorder:
    """Stores one reply as its bubbles are confirmed; `settle` it once delivery ends.

    The record holds `text` exactly as the model wrote it (the bubbles are cut from it and
    may be formatted), so the next request replays the same bytes the provider cached."""

    def __init__(
        self,
        bubbles: ReplyBubbles,
        session: SessionInfo,
        reply_to: int | None,
        text: str,
        reasoning: Reasoning | None = None,
    ) -> None:
        self.bubbles = bubbles
        self.text = text
        self.reasoning = reasoning
        self.session = session
        self.reply_to = reply_to
        self.record: StoredRecord | None = None
        self.stored = 0

    async def __call__(self, delivery: Delivery) -> None:
        bubbles = self.bubbles
        confirmed = sum(1 for mid in delivery.message_ids if mid is not None)
        if self.record is None:
            body = AssistantRecord(text=self.text, reasoning=self.reasoning)
            (self.record,) = await bubbles.store.append(
                self.session.id,
                [
                    NewRecord(
                        body=body,
                        created_at=bubbles.clock.now(),
                        message_ids=delivery.message_ids,
                        tokens=record_tokens(body),
                    )
                ],
                platform_messages=bubbles.bubble_messages(
                    self.session, delivery, reply_to=self.reply_to, record_id=None
                ),
            )
        else:
            self.record = await bubbles.store.set_message_ids(self.record.id, delivery.message_ids)
            await bubbles.platform_messages.record_platform_messages(
                bubbles.bubble_messages(
                    self.session,
                    delivery,
                    reply_to=self.reply_to,
                    record_id=self.record.id,
                    slots=range(self.stored, confirmed),
                )
            )
        self.stored = confirmed

    async def settle(self, delivery: Delivery) -> None:
        """After delivery: keep only what was delivered when it stopped early."""
        if self.record is None or all(mid is not None for mid in delivery.message_ids):
            return
        await settle_partial_reply(
            self.bubbles,
            self.session,
            self.record,
            delivery,
            reply_to=self.reply_to,
            reasoning=self.reasoning,
        )
