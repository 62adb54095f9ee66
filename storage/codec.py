"""What a row of the SQL tables holds <-> the domain's value: pure, both directions.

Sessions, records and platform messages are read from rows (`session_info`, `stored_record`,
`DecodedRecords`, ...) and written as rows (`record_row`, `platform_message_row`, ...); a
record's body and a platform message's media travel as JSON text in one column
(`storage.payload`). Reactions have theirs in `storage.reaction_codec`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.context.alias_table import AliasCounter
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import (
    StoredRecord,
)
from bot.ports import NewRecord, SessionInfo
from storage.payload import (
    decode_media,
    decode_payload,
    encode_media,
    encode_message_ids,
    encode_payload,
    first_message_id,
)

# ---------------------------------------------------------------- table rows


def alias_parts(seq: int | None, message_ids: Sequence[int | None]) -> tuple[str | None, ...]:
    """The per-slot aliases of a record whose ordinal (`alias_seq`) is `seq`."""
    if seq is None:
        return (None,) * len(message_ids)
    return AliasCounter(seq - 1).assign(message_ids).parts


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


def record_row(
    session_id: int,
    parent_id: int | None,
    record: NewRecord,
    *,
    alias_seq: int | None,
    alias_last: int,
) -> dict[str, Any]:
    """The `agent_messages` row of `record` under `parent_id` (its id aside): the one list
    of a record's columns every writer inserts."""
    return {
        "session_id": session_id,
        "parent_id": parent_id,
        "kind": record.body.kind,
        "created_at": utc(record.created_at),
        "payload": encode_payload(record.body, record.message_ids),
        "tokens": record.tokens,
        "first_message_id": first_message_id(record.message_ids),
        "message_ids": encode_message_ids(record.message_ids),
        "alias_seq": alias_seq,
        "alias_last": alias_last,
    }


def inserted_record(record_id: int, row: Mapping[str, Any], record: NewRecord) -> StoredRecord:
    """The stored record of `record`, inserted as `row` (`record_row`) with id `record_id`
    (no payload to decode: the body is at hand)."""
    return StoredRecord(
        id=record_id,
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        created_at=row["created_at"],
        body=record.body,
        message_ids=record.message_ids,
        tokens=record.tokens,
        alias_seq=row["alias_seq"],
        alias_parts=alias_parts(row["alias_seq"], record.message_ids),
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


SESSION_PREFIX = "s_"
"""The names of a session's columns in a row of `storage.queries.window_load`."""
REACTION_PREFIX = "r_"
"""The names of a reaction's columns in a row of `storage.queries.window_load`."""


class PrefixedRow:
    """One part's columns of a `window_load` row under their table's names (`s_chat_id` →
    `chat_id`), for `session_info` and `stored_reaction`."""

    __slots__ = ("_prefix", "_row")

    def __init__(self, row: Any, prefix: str) -> None:
        self._row = row
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, self._prefix + name)
