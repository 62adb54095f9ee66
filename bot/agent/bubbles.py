"""Reply bubbles: a reply is stored bubble by bubble, as Telegram confirms each one.

The first confirmed bubble appends the assistant record (the whole planned text, one slot
per bubble, unconfirmed slots `None`) with its platform message; each later bubble fills its
slot (`set_message_ids`) and adds its platform message. So a crash in the middle of a reply leaves
every confirmed bubble stored, and the `None` slots tell start-up recovery that the reply
was cut short. When delivery stops at a failure instead, the record is replaced by a
sibling holding only the delivered bubbles (`settle_partial_reply`): undelivered text is
never stored as sent.

See docs/architecture.md, A turn's path.
"""

from __future__ import annotations

from bot.context.projection import record_tokens
from bot.domain.messages import Reasoning
from bot.domain.records import AssistantRecord, StoredRecord
from bot.ports import Clock, Delivery, Messenger, NewRecord, PlatformMessage, SessionInfo
from bot.store_ports import HistoryStore, PlatformMessages


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


async def settle_partial_reply(
    bubbles: ReplyBubbles,
    session: SessionInfo,
    record: StoredRecord,
    delivery: Delivery,
    *,
    reply_to: int | None,
    reasoning: Reasoning | None = None,
) -> StoredRecord:
    """Replace a partly delivered reply record by a sibling holding the delivered bubbles
    only (a new branch under the same parent, like `/retry`; aliases stay the same)."""
    confirmed = [
        (mid, bubble)
        for mid, bubble in zip(delivery.message_ids, delivery.texts, strict=False)
        if mid is not None
    ]
    kept = reasoning if reasoning is not None else _reasoning_of(record)
    body = AssistantRecord(text="\n".join(bubble for _mid, bubble in confirmed), reasoning=kept)
    ids = tuple(mid for mid, _bubble in confirmed)
    (sibling,) = await bubbles.store.append(
        session.id,
        [
            NewRecord(
                body=body, created_at=record.created_at, message_ids=ids, tokens=record_tokens(body)
            )
        ],
        parent_id=record.parent_id,
    )
    await bubbles.platform_messages.record_platform_messages(
        bubbles.bubble_messages(session, delivery, reply_to=reply_to, record_id=sibling.id)
    )
    return sibling


def _reasoning_of(record: StoredRecord) -> Reasoning | None:
    return record.body.reasoning if isinstance(record.body, AssistantRecord) else None
