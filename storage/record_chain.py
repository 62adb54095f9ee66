"""Appending a chain of records to a session tree: each under the previous one, with its
alias ordinal derived as it is inserted (`storage.alias_cache`), so reads never count.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.records import StoredRecord
from bot.ports import NewRecord
from storage.alias_cache import alias_parts, derive_record, derive_with_earliest
from storage.codec import encode_message_ids, encode_payload, first_message_id
from storage.queries import INSERT_RECORD
from storage.rows import utc


async def insert_chain(
    conn: AsyncConnection,
    session_id: int,
    records: Sequence[NewRecord],
    *,
    parent: int | None,
    last: int,
    earliest: int | None,
) -> list[StoredRecord]:
    """Insert `records` in order, the first under `parent` (whose `alias_last` is `last`),
    each later one under the one before. `earliest` is the oldest record up to `parent`
    holding the first record's first platform id (`APPEND_HEAD` found it already)."""
    first = first_message_id(records[0].message_ids)
    stored: list[StoredRecord] = []
    for index, record in enumerate(records):
        if index == 0:
            derived = await derive_with_earliest(conn, parent, last, first, earliest=earliest)
        else:
            first = first_message_id(record.message_ids)
            derived = await derive_record(conn, session_id, parent, last, first)
        created_at = utc(record.created_at)
        values = {
            "session_id": session_id,
            "parent_id": parent,
            "kind": record.body.kind,
            "created_at": created_at,
            "payload": encode_payload(record.body, record.message_ids),
            "tokens": record.tokens,
            "first_message_id": first,
            "message_ids": encode_message_ids(record.message_ids),
            "alias_seq": derived.seq,
            "alias_last": derived.last,
        }
        new_id = (await conn.execute(INSERT_RECORD, values)).scalar_one()
        stored.append(
            StoredRecord(
                id=new_id,
                session_id=session_id,
                parent_id=parent,
                created_at=created_at,
                body=record.body,
                message_ids=record.message_ids,
                tokens=record.tokens,
                alias_seq=derived.seq,
                alias_parts=alias_parts(derived.seq, record.message_ids),
            )
        )
        parent, last = new_id, derived.last
    return stored
