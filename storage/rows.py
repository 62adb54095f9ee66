"""Rows of the SQL tables to and from the domain's values (sessions, records, platform messages)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from bot.domain.ids import SessionKey
from bot.domain.records import StoredRecord
from bot.ports import PlatformMessage, SessionInfo, StoredReaction
from storage.alias_cache import alias_parts
from storage.codec import decode_media, decode_payload, encode_media


def utc(value: datetime) -> datetime:
    """Aware UTC; a naive value (SQLite hands those back) is taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def session_info(row: Any) -> SessionInfo:
    return SessionInfo(
        id=row.id,
        key=SessionKey(platform=row.platform, chat_id=row.chat_id, thread_id=row.thread_id),
        scene=row.scene,
        title=row.title,
        active_leaf_id=row.active_leaf_id,
        window_start_id=row.window_start_id,
        route=row.route,
        closed=row.closed_at is not None,
    )


def stored_record(row: Any) -> StoredRecord:
    body, message_ids = decode_payload(row.payload)
    return StoredRecord(
        id=row.id,
        session_id=row.session_id,
        parent_id=row.parent_id,
        created_at=utc(row.created_at),
        body=body,
        message_ids=message_ids,
        tokens=row.tokens,
        alias_seq=row.alias_seq,
        alias_parts=alias_parts(row.alias_seq, message_ids),
    )


DECODED_RECORDS = 20_000
"""How many decoded records a store keeps (a window of ~100-300 records for each busy chat)."""
DECODED_CHARS = 8_000_000
"""And at most this many payload characters (tool results run to 16,000 characters each;
each kept record holds its payload and its decoded body: some 20-40 MB at the bound)."""


class DecodedRecords:
    """`stored_record` with the decoded records of recent rows kept, least recently used
    out first, within `capacity` records and `max_chars` payload characters.

    Every turn reads its whole window again; decoding each payload and deriving its aliases
    was a fifth of a busy bot's CPU. A kept record is reused only while its row is exactly
    as it was (same payload, parent, alias ordinal, tokens, session and time): a changed row
    (confirmed bubbles, repaired aliases, a pruned root) or a reused id is decoded afresh.
    """

    __slots__ = ("_capacity", "_chars", "_kept", "_max_chars")

    def __init__(self, capacity: int = DECODED_RECORDS, max_chars: int = DECODED_CHARS) -> None:
        self._capacity = capacity
        self._max_chars = max_chars
        self._chars = 0
        self._kept: OrderedDict[int, tuple[tuple[Any, ...], StoredRecord]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def record(self, row: Any) -> StoredRecord:
        """The record of a row of `storage.queries.RECORD_COLUMNS`."""
        kept = self._kept
        version = (
            row.payload,
            row.parent_id,
            row.alias_seq,
            row.tokens,
            row.session_id,
            row.created_at,
        )
        entry = kept.pop(row.id, None)
        if entry is not None:
            if entry[0] == version:
                kept[row.id] = entry  # now the most recently used
                return entry[1]
            self._chars -= len(entry[0][0])
        record = stored_record(row)
        kept[row.id] = (version, record)
        self._chars += len(version[0])
        while len(kept) > self._capacity or (self._chars > self._max_chars and len(kept) > 1):
            _id, (old, _record) = kept.popitem(last=False)
            self._chars -= len(old[0])
        return record


def platform_message_from_row(row: Any) -> PlatformMessage:
    return PlatformMessage(
        chat_id=row.chat_id,
        thread_id=row.thread_id,
        message_id=row.message_id,
        sender_id=row.sender_id,
        sender_name=row.sender_name,
        is_bot=row.is_bot,
        date=utc(row.date),
        text=row.text,
        media=decode_media(row.media),
        reply_to_message_id=row.reply_to_message_id,
        record_id=row.record_id,
        edited_at=None if row.edited_at is None else utc(row.edited_at),
    )


def platform_message_row(
    message: PlatformMessage, *, default_record_id: int | None
) -> dict[str, Any]:
    """The `platform_events` row of `message`; linked to `default_record_id` when it names no
    record."""
    return {
        "chat_id": message.chat_id,
        "message_id": message.message_id,
        "thread_id": message.thread_id,
        "sender_id": message.sender_id,
        "sender_name": message.sender_name,
        "is_bot": message.is_bot,
        "date": utc(message.date),
        "text": message.text,
        "media": encode_media(message.media),
        "reply_to_message_id": message.reply_to_message_id,
        "record_id": message.record_id if message.record_id is not None else default_record_id,
        "edited_at": None if message.edited_at is None else utc(message.edited_at),
    }


def stored_reaction(row: Any) -> StoredReaction:
    return StoredReaction(
        chat_id=row.chat_id,
        thread_id=row.thread_id,
        message_id=row.message_id,
        user_id=row.user_id,
        user_name=row.user_name,
        emoji=row.emoji,
        created_at=utc(row.created_at),
    )


def reaction_row(reaction: StoredReaction) -> dict[str, Any]:
    return {
        "chat_id": reaction.chat_id,
        "thread_id": reaction.thread_id,
        "message_id": reaction.message_id,
        "user_id": reaction.user_id,
        "user_name": reaction.user_name,
        "emoji": reaction.emoji,
        "created_at": utc(reaction.created_at),
    }


def latest_reactions(reactions: Iterable[StoredReaction]) -> tuple[StoredReaction, ...]:
    """Each member's latest reaction per message and emoji, in time order: a member who
    toggles 👍 a thousand times counts once (several different emoji of one member, which
    Telegram allows, each count)."""
    latest: dict[tuple[int, int, int, int, str], StoredReaction] = {}
    for reaction in reactions:
        key = (
            reaction.chat_id,
            reaction.thread_id,
            reaction.message_id,
            reaction.user_id,
            reaction.emoji,
        )
        known = latest.get(key)
        if known is None or reaction.created_at >= known.created_at:
            latest.pop(key, None)  # re-insert: the dict keeps the latest's time order
            latest[key] = reaction
    return tuple(sorted(latest.values(), key=lambda r: r.created_at))
