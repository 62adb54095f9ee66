"""The record write, once: `append` and the inbound group commit as plans (`storage.plan`).

`append_plan` appends a chain of records with their platform messages; `inbound_plan`
stores a `getUpdates` batch in one transaction. Neither does I/O: they yield statements and
read their rows, and an executor runs them (a `sqlite3` job, or a SQLAlchemy connection).
A record's columns come from `storage.codec.record_row` and its stored value from
`storage.codec.inserted_record`, for both; its alias columns from `storage.alias_cache`.

The batch (`inbound_plan`) costs a fixed handful of statements, whatever its size:

1. lock the batch's session rows (`SqlParts.lock_sessions`);
2. which of the batch's platform messages are already stored (the de-duplication key, read
   inside the transaction, so a redelivered update is found even after a crash between a
   commit and the offset's confirmation);
3. each session's active leaf and its cached `alias_last`;
4. which (session, first message id) pairs already have a record (then the alias is not
   simply the next ordinal: see `storage.alias_cache`);
5. record ids for the new rows (`SqlParts.new_record_ids`);
6. one multi-row INSERT of the records, the platform messages, one UPDATE per moved leaf.

A session with anything unusual (a leaf whose alias cache is missing, a message id already
on record) has its remaining items appended by `append_plan` after those, in order, in the
same transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, insert, select, tuple_

from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import StoredRecord
from bot.errors import SessionNotFound
from bot.ports import InboundAppend, NewRecord
from storage.alias_cache import derive, derive_record, derive_with_earliest
from storage.alias_repair import repair_path
from storage.codec import inserted_record, platform_message_row, record_row
from storage.payload import first_message_id
from storage.plan import Plan, Rows, Run, SqlParts, first_row
from storage.queries import APPEND_HEAD, INSERT_RECORD, MOVE_LEAF, RECORD_IN_SESSION
from storage.tables import MESSAGES, PLATFORM_MESSAGES, SESSIONS

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- append


@dataclass(frozen=True, slots=True, kw_only=True)
class Append:
    """One `HistoryStore.append` (see there for what each field means)."""

    session_id: int
    records: Sequence[NewRecord]
    parent_id: int | None = None
    platform_messages: Sequence[PlatformMessage] = ()
    move_leaf: bool = True
    at_root: bool = False
    now: datetime


def append_plan(parts: SqlParts, append: Append) -> Plan[list[StoredRecord]]:
    """Lock the session, read where the chain goes (`APPEND_HEAD`, repairing the parent's
    alias cache when missing), insert each record under the one before, store the platform
    messages (linked to the last record unless they name one), move the leaf."""
    session_id, records = append.session_id, append.records
    if not records:
        raise ValueError("append needs at least one record")
    yield from parts.lock_sessions((session_id,))
    first = first_message_id(records[0].message_ids)
    params = {"session_id": session_id, "parent_id": append.parent_id, "first": first}
    heads = yield Rows(APPEND_HEAD, params)
    head: Any = heads[0] if heads else None
    parent, last = _append_parent(head, session_id, append.parent_id, at_root=append.at_root)
    if last is None:  # the parent's alias cache is missing (only a parent's can be)
        assert parent is not None
        yield from repair_path(head.alias_root_base, parent)
        params = {"record_id": parent, "session_id": session_id}
        last = first_row((yield Rows(RECORD_IN_SESSION, params))).alias_last
        assert last is not None
    stored: list[StoredRecord] = []
    for index, record in enumerate(records):
        if index == 0:
            derived = yield from derive_with_earliest(parent, last, first, earliest=head.earliest)
        else:
            first = first_message_id(record.message_ids)
            derived = yield from derive_record(session_id, parent, last, first)
        row = record_row(session_id, parent, record, alias_seq=derived.seq, alias_last=derived.last)
        if index < len(records) - 1:
            (inserted,) = yield Rows(INSERT_RECORD, row)
        else:
            inserted = yield from _insert_last(parts, append, row)
        stored.append(inserted_record(inserted[0], row, record))
        parent, last = inserted[0], derived.last
    return stored


def _insert_last(parts: SqlParts, append: Append, row: dict[str, Any]) -> Plan[Any]:
    """Insert the chain's last record, store the platform messages (linked to it unless they
    name a record), move the leaf to it: in one statement where the database has one
    (`SqlParts.linked_insert`), else one step each. The inserted row (its id first)."""
    messages = [platform_message_row(m, default_record_id=None) for m in append.platform_messages]
    moved = {"session_id": append.session_id, "now": append.now} if append.move_leaf else None
    linked = parts.linked_insert(row, messages, moved)
    if linked is not None:
        (inserted,) = yield linked
        return inserted
    (inserted,) = yield Rows(INSERT_RECORD, row)
    if messages:
        linked_messages = [
            message if message["record_id"] is not None else {**message, "record_id": inserted[0]}
            for message in messages
        ]
        yield from parts.store_platform_messages(linked_messages)
    if moved is not None:
        yield Run(MOVE_LEAF, ({**moved, "leaf_id": inserted[0]},))
    return inserted


def _append_parent(
    head: Any, session_id: int, parent_id: int | None, *, at_root: bool
) -> tuple[int | None, int | None]:
    """Where an append goes, from its `APPEND_HEAD` row: the parent (None: a new root) and
    the `alias_last` the first record continues from (None: the parent's alias cache is
    missing and must be repaired first)."""
    if head is None:
        raise SessionNotFound(f"no session {session_id}")
    parent = None if at_root else head.active_leaf_id if parent_id is None else parent_id
    if parent is None:
        return None, head.alias_root_base
    if head.parent_row is None:
        raise SessionNotFound(f"no record {parent} in session {session_id}")
    return parent, head.parent_last


# ---------------------------------------------------------------- the inbound group commit


@dataclass(frozen=True, slots=True)
class Encoded:
    """An inbound item with its rows encoded before the transaction (an item that cannot
    be encoded is skipped without touching the database). `row` is its record's row with
    parent and alias columns still to fill; `key` its platform message's (chat id, message
    id), the de-duplication key; `first` its first confirmed platform id."""

    index: int
    item: InboundAppend
    row: dict[str, Any]
    message_row: dict[str, Any]
    key: tuple[int, int]
    first: int | None

    @classmethod
    def of(cls, index: int, item: InboundAppend) -> Encoded:
        row = record_row(item.session_id, None, item.record, alias_seq=None, alias_last=0)
        message = item.platform_message
        return cls(
            index=index,
            item=item,
            row=row,
            message_row=platform_message_row(message, default_record_id=None),
            key=(message.chat_id, message.message_id),
            first=row["first_message_id"],
        )


@dataclass(slots=True)
class _Chain:
    parent: int | None
    last: int
    slow: bool = False


_HEAD_PARENT = MESSAGES.alias("parent")
_HEADS = (
    select(
        SESSIONS.c.id,
        SESSIONS.c.active_leaf_id,
        SESSIONS.c.alias_root_base,
        _HEAD_PARENT.c.alias_last.label("parent_last"),
    )
    .select_from(
        SESSIONS.outerjoin(
            _HEAD_PARENT,
            and_(
                _HEAD_PARENT.c.id == SESSIONS.c.active_leaf_id,
                _HEAD_PARENT.c.session_id == SESSIONS.c.id,
            ),
        )
    )
    .where(SESSIONS.c.id.in_(bindparam("session_ids", expanding=True)))
)
# Row-value IN: one index probe per pair (two plain INs would probe every combination).
_KNOWN_MESSAGES = select(PLATFORM_MESSAGES.c.chat_id, PLATFORM_MESSAGES.c.message_id).where(
    tuple_(PLATFORM_MESSAGES.c.chat_id, PLATFORM_MESSAGES.c.message_id).in_(
        bindparam("keys", expanding=True)
    )
)
_KNOWN_FIRSTS = (
    select(MESSAGES.c.session_id, MESSAGES.c.first_message_id)
    .where(
        tuple_(MESSAGES.c.session_id, MESSAGES.c.first_message_id).in_(
            bindparam("pairs", expanding=True)
        )
    )
    .distinct()
)
_INSERT_RECORDS = insert(MESSAGES)


def inbound_plan(
    parts: SqlParts, batch: Sequence[Encoded], now: datetime
) -> Plan[dict[int, StoredRecord]]:
    """Store `batch` (see the module docstring); the stored records by item index (a
    duplicate, or an item of an unknown session, has none)."""
    session_ids = sorted({e.item.session_id for e in batch})
    yield from parts.lock_sessions(session_ids)
    keys = sorted({e.key for e in batch})
    known = {(row.chat_id, row.message_id) for row in (yield Rows(_KNOWN_MESSAGES, {"keys": keys}))}
    heads = {row.id: row for row in (yield Rows(_HEADS, {"session_ids": session_ids}))}
    pairs = sorted({(e.item.session_id, e.first) for e in batch if e.first is not None})
    on_record: set[tuple[int, int]] = set()
    if pairs:
        rows = yield Rows(_KNOWN_FIRSTS, {"pairs": pairs})
        on_record = {(row.session_id, row.first_message_id) for row in rows}

    chains: dict[int, _Chain] = {}
    fast: list[tuple[Encoded, _Chain]] = []
    later: list[Encoded] = []
    seen: set[tuple[int, int]] = set()
    for entry in batch:
        if entry.key in known or entry.key in seen:
            log.info("duplicate message %s/%s", *entry.key)
            continue
        seen.add(entry.key)
        session_id = entry.item.session_id
        head = heads.get(session_id)
        if head is None:
            log.warning("not storing message %s/%s: no session %s", *entry.key, session_id)
            continue
        chain = chains.get(session_id)
        if chain is None:
            leaf = head.active_leaf_id
            last = head.alias_root_base if leaf is None else head.parent_last
            missing = leaf is not None and last is None
            chain = chains[session_id] = _Chain(leaf, last or 0, slow=missing)
        if chain.slow or (session_id, entry.first) in on_record:
            chain.slow = True  # this session's remaining items go through `append_plan`
            later.append(entry)
            continue
        fast.append((entry, chain))

    stored: dict[int, StoredRecord] = {}
    if fast:
        ids = yield from parts.new_record_ids(len(fast))
        records: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []
        leaves: dict[int, int] = {}
        for (entry, chain), new_id in zip(fast, ids, strict=True):
            derived = derive(chain.last, entry.first, seq_on_path=None)  # first id is new here
            row = {
                **entry.row,
                "parent_id": chain.parent,
                "alias_seq": derived.seq,
                "alias_last": derived.last,
            }
            records.append({"id": new_id, **row})
            messages.append({**entry.message_row, "record_id": new_id})
            stored[entry.index] = inserted_record(new_id, row, entry.item.record)
            chain.parent, chain.last = new_id, derived.last
            leaves[entry.item.session_id] = new_id
        yield Run(_INSERT_RECORDS, records)
        yield from parts.store_platform_messages(messages)
        moved = [{"session_id": sid, "leaf_id": leaf, "now": now} for sid, leaf in leaves.items()]
        yield Run(MOVE_LEAF, moved)
    for entry in later:
        append = Append(
            session_id=entry.item.session_id,
            records=(entry.item.record,),
            platform_messages=(entry.item.platform_message,),
            now=now,
        )
        (stored[entry.index],) = yield from append_plan(parts, append)
    return stored
