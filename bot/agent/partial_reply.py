"""A reply whose delivery stopped early: its record replaced by one holding only the
bubbles Telegram confirmed (`settle_partial_reply`), so undelivered text is never stored as
sent.

`bot.agent.reply.BubbleRecorder` settles a reply this way when delivery stops at a failure;
start-up recovery (`bot.services.recovery`) does for a reply a crash cut short.
"""

from __future__ import annotations

from typing import Protocol

from bot.context.projection import record_tokens
from bot.domain.messages import Reasoning
from bot.domain.platform_messages import Delivery, PlatformMessage
from bot.domain.records import AssistantRecord, StoredRecord
from bot.ports import NewRecord, SessionInfo
from bot.store_ports import HistoryStore, PlatformMessages


class StoredBubbles(Protocol):
    """Where a reply's bubbles are stored (`bot.agent.reply.ReplyBubbles`)."""

    store: HistoryStore
    platform_messages: PlatformMessages

    def bubble_messages(
        self,
        session: SessionInfo,
        delivery: Delivery,
        *,
        reply_to: int | None,
        record_id: int | None,
    ) -> list[PlatformMessage]: ...


async def settle_partial_reply(
    bubbles: StoredBubbles,
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
