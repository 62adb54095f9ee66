"""What an inbound message becomes in storage: its scene, its record, its platform message."""

from __future__ import annotations

from collections.abc import Sequence

from bot.context.projection import record_tokens
from bot.domain.facts import InboundMessage
from bot.domain.ids import Scene
from bot.domain.records import RecordBody, ServiceMessageRecord, StoredRecord, UserRecord
from bot.ports import NewRecord, PlatformMessage


def last_member_record(records: Sequence[StoredRecord]) -> StoredRecord | None:
    """The newest record of a member's message in `records` (oldest first), if any."""
    return next((r for r in reversed(records) if isinstance(r.body, UserRecord)), None)


def last_answered_of(records: Sequence[StoredRecord], sender_id: int) -> StoredRecord | None:
    """The newest message of `sender_id` that the bot answered: a reply answers the newest
    member message before it (as the turn that wrote it did)."""
    trigger: StoredRecord | None = None
    answered: StoredRecord | None = None
    for record in records:
        if isinstance(record.body, UserRecord):
            trigger = record
        elif record.kind == "assistant" and trigger is not None:
            assert isinstance(trigger.body, UserRecord)
            if trigger.body.sender.id == sender_id:
                answered = trigger
    return answered


def scene_of(message: InboundMessage, owner_id: int | None) -> Scene:
    if message.chat_type == "private":
        return "owner" if owner_id is not None and message.sender.id == owner_id else "private"
    return "group"


def record_of(message: InboundMessage, *, merged: bool, refused: bool = False) -> NewRecord:
    """The record of a new (or edited) message; `merged` marks a later message of a burst
    that joins the turn of the one before, `refused` one the rate limit turned away."""
    body = _body(message, merged=merged, refused=refused)
    return NewRecord(
        body=body,
        created_at=message.date,
        message_ids=(message.message_id,),
        tokens=record_tokens(body),
    )


def session_title_of(message: InboundMessage) -> str | None:
    """The title a message gives its session: the chat's title, or in a forum topic the
    topic's name (`None` when this message does not show it: the stored one stays)."""
    if message.thread_id:
        return message.topic_name
    return message.chat_title


def platform_message_of(
    message: InboundMessage, *, known: PlatformMessage | None = None
) -> PlatformMessage:
    """The message as a platform message; for an edit, `known` (the stored one) keeps its
    first date and its record."""
    return PlatformMessage(
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
        record_id=known.record_id if known is not None else None,
        edited_at=message.edit_date if message.is_edit else None,
    )


def _body(message: InboundMessage, *, merged: bool, refused: bool) -> RecordBody:
    if message.event is not None:
        return ServiceMessageRecord(text=message.event, actor=message.sender)
    return UserRecord(
        sender=message.sender,
        text=message.text,
        media=message.media,
        quote=message.quote,
        forward=message.forward,
        merged=merged,
        album=message.media_group_id,
        linked_channel=message.automatic_forward,
        refused=refused,
    )
