"""Group commit of inbound messages: a whole `getUpdates` batch in one transaction.

Storing one message on its own costs one write transaction of five statements, each a
round trip through the database driver (aiosqlite: a hop to its thread and back) plus two
reads before it: about thirty hops per message, which capped ingest at ~200 messages/s.
Here a batch costs a fixed handful of statements, whatever its size:

1. (PostgreSQL) lock the batch's session rows, in id order (SQLite: `BEGIN IMMEDIATE`
   holds the only write lock already);
2. which of the batch's platform messages are already stored (the de-duplication key, read
   inside the transaction, so a redelivered update is found even after a crash between a
   commit and the offset's confirmation);
3. each session's active leaf and its cached `alias_last`;
4. which (session, first message id) pairs already have a record (then the alias is not
   simply the next ordinal: see `storage.sql`);
5. record ids for the new rows (SQLite: after the largest id, under the write lock;
   PostgreSQL: from the sequence);
6. one multi-row INSERT of the records, one of the platform messages, one UPDATE per moved
   leaf (executemany).

Each session's new records chain in batch order (parent → child), and their alias columns
come from `storage.alias_cache.derive`, the rule `SqlStore.append` uses (a first id not yet
on record: the next ordinal after the parent's `alias_last`).
Anything unusual for a session (a leaf whose alias cache is missing, a message id already
on record) sends that session's remaining items down the ordinary one-by-one path after the
commit, in order. An item that cannot be encoded is logged and skipped; a statement that
fails on bad data splits the batch into single items, so only the bad one is skipped; any
other failure (a locked or lost database) retries the whole transaction.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, text, tuple_, update
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.records import StoredRecord
from bot.errors import StorageUnavailable
from bot.ports import InboundAppend
from bot.retry import with_retries
from storage.alias_cache import derive
from storage.codec import (
    alias_parts,
    encode_message_ids,
    encode_payload,
    first_message_id,
    platform_message_row,
    utc,
)
from storage.search import index_platform_messages
from storage.tables import MESSAGES, PLATFORM_MESSAGES, SESSIONS

log = logging.getLogger(__name__)

TRIES = 4
"""Attempts of a batch's transaction when the database is busy or away."""

WriteConnection = Callable[[], AbstractAsyncContextManager[AsyncConnection]]
AppendOne = Callable[[InboundAppend], Awaitable[StoredRecord | None]]


@dataclass(slots=True)
class _Prepared:
    index: int
    item: InboundAppend
    created_at: datetime
    payload: str
    message_ids: str
    first: int | None
    message_row: dict[str, Any]


@dataclass(slots=True)
class _Chain:
    parent: int | None
    last: int
    slow: bool = False


@dataclass(slots=True)
class _Outcome:
    stored: dict[int, StoredRecord] = field(default_factory=dict)
    later: list[_Prepared] = field(default_factory=list)


class InboundBatchWriter:
    """`append_inbound` of the SQL store. `write` opens a write transaction (errors become
    `StorageUnavailable` with the database error as its cause); `append_one` stores one item
    the ordinary way, in its own transaction (None for a duplicate)."""

    def __init__(
        self, write: WriteConnection, append_one: AppendOne, now: Callable[[], datetime]
    ) -> None:
        self._write = write
        self._append_one = append_one
        self._now = now

    async def append(self, items: Sequence[InboundAppend]) -> tuple[StoredRecord | None, ...]:
        results: list[StoredRecord | None] = [None] * len(items)
        prepared: list[_Prepared] = []
        for index, item in enumerate(items):
            try:
                prepared.append(_prepare(index, item))
            except Exception as exc:
                _skip(item, f"{type(exc).__name__}: {exc}")
        later = await self._commit(prepared, results) if prepared else []
        for entry in later:
            try:
                results[entry.index] = await self._append_one(entry.item)
            except (StorageUnavailable, *_DRIVER_DATA_ERRORS) as exc:
                if not _bad_data(exc):
                    raise
                _skip(entry.item, _reason(exc))
            except Exception as exc:  # e.g. its session was deleted meanwhile
                _skip(entry.item, f"{type(exc).__name__}: {exc}")
        return tuple(results)

    async def _commit(
        self, prepared: list[_Prepared], results: list[StoredRecord | None]
    ) -> list[_Prepared]:
        """Store `prepared` in one transaction (retried whole); returns the items left for
        the one-by-one path."""

        async def write_once() -> _Outcome:
            async with self._write() as conn:
                return await _write_batch(conn, prepared, self._now())

        try:
            outcome = await with_retries(
                write_once,
                retries=TRIES - 1,
                first_delay=0.05,
                transient=(StorageUnavailable, *_DRIVER_DATA_ERRORS),
                retry_if=lambda exc: not _bad_data(exc),
                on_retry=lambda exc: log.warning(
                    "storing a batch failed (%s); retrying the whole batch", exc
                ),
            )
        except (StorageUnavailable, *_DRIVER_DATA_ERRORS) as exc:
            if not _bad_data(exc):
                raise
            if len(prepared) == 1:
                _skip(prepared[0].item, _reason(exc))
                return []
            later: list[_Prepared] = []
            for entry in prepared:  # find the bad one: each item alone
                later += await self._commit([entry], results)
            return later
        for index, record in outcome.stored.items():
            results[index] = record
        return outcome.later


def _skip(item: InboundAppend, reason: str) -> None:
    log.warning(
        "not storing message %s/%s: %s",
        item.platform_message.chat_id,
        item.platform_message.message_id,
        reason,
    )


_DRIVER_DATA_ERRORS = (OverflowError, ValueError, TypeError)
"""What a driver raises, unwrapped, for a value it cannot send (sqlite3: an int past 64 bits)."""
_SQLITE_DATA_ERRORS = (*_DRIVER_DATA_ERRORS, sqlite3.IntegrityError, sqlite3.DataError)
"""Those, and what SQLite refuses about a row when SQLAlchemy is not there to wrap it
(`storage.sqlite_driver.FastSqlite`: the cause of its `StorageUnavailable`)."""


def _bad_data(exc: BaseException) -> bool:
    """A failure caused by the rows themselves (retrying cannot help), not the database:
    a constraint or a value the database refuses (SQLAlchemy's error, or on SQLite's fast
    path `sqlite3`'s own), or one the driver cannot send (asyncpg raises its own
    `DataError`, a ValueError, which SQLAlchemy passes on as a generic error), found
    anywhere along the chain of causes."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (IntegrityError, DataError, *_SQLITE_DATA_ERRORS)):
            return True
        if isinstance(current, StatementError) and not isinstance(current, DBAPIError):
            return True  # SQLAlchemy could not process the parameters
        orig = getattr(current, "orig", None)
        todo += [current.__cause__, orig if isinstance(orig, BaseException) else None]
    return False


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ if isinstance(exc, StorageUnavailable) else exc
    return f"{type(cause).__name__}: {cause}"


def _prepare(index: int, item: InboundAppend) -> _Prepared:
    record, message = item.record, item.platform_message
    return _Prepared(
        index=index,
        item=item,
        created_at=utc(record.created_at),
        payload=encode_payload(record.body, record.message_ids),
        message_ids=encode_message_ids(record.message_ids),
        first=first_message_id(record.message_ids),
        message_row=platform_message_row(message, default_record_id=None),
    )


_PARENT = MESSAGES.alias("parent")
_HEADS = (
    select(
        SESSIONS.c.id,
        SESSIONS.c.active_leaf_id,
        SESSIONS.c.alias_root_base,
        _PARENT.c.alias_last.label("parent_last"),
    )
    .select_from(
        SESSIONS.outerjoin(
            _PARENT,
            and_(_PARENT.c.id == SESSIONS.c.active_leaf_id, _PARENT.c.session_id == SESSIONS.c.id),
        )
    )
    .where(SESSIONS.c.id.in_(bindparam("session_ids", expanding=True)))
)
_LOCK_SESSIONS = (
    select(SESSIONS.c.id)
    .where(SESSIONS.c.id.in_(bindparam("session_ids", expanding=True)))
    .order_by(SESSIONS.c.id)
    .with_for_update()
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
_MAX_RECORD_ID = select(func.coalesce(func.max(MESSAGES.c.id), 0))
_PG_RECORD_IDS = text(
    "SELECT nextval(pg_get_serial_sequence('agent_messages', 'id')) FROM generate_series(1, :n)"
)
_INSERT_RECORDS = insert(MESSAGES)
_INSERT_MESSAGES = insert(PLATFORM_MESSAGES)
_MOVE_LEAF = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("session_id"))
    .values(active_leaf_id=bindparam("leaf_id"), updated_at=bindparam("now"))
)


async def _write_batch(
    conn: AsyncConnection, prepared: Sequence[_Prepared], now: datetime
) -> _Outcome:
    postgres = conn.dialect.name == "postgresql"
    session_ids = sorted({p.item.session_id for p in prepared})
    if postgres:
        await conn.execute(_LOCK_SESSIONS, {"session_ids": session_ids})
    keys = sorted(
        {(p.item.platform_message.chat_id, p.item.platform_message.message_id) for p in prepared}
    )
    known = {
        (row.chat_id, row.message_id) for row in await conn.execute(_KNOWN_MESSAGES, {"keys": keys})
    }
    heads = {row.id: row for row in await conn.execute(_HEADS, {"session_ids": session_ids})}
    pairs = sorted({(p.item.session_id, p.first) for p in prepared if p.first is not None})
    on_record = (
        {
            (row.session_id, row.first_message_id)
            for row in await conn.execute(_KNOWN_FIRSTS, {"pairs": pairs})
        }
        if pairs
        else set()
    )

    outcome = _Outcome()
    chains: dict[int, _Chain] = {}
    fast: list[tuple[_Prepared, _Chain]] = []
    seen: set[tuple[int, int]] = set()
    for entry in prepared:
        key = (entry.item.platform_message.chat_id, entry.item.platform_message.message_id)
        if key in known or key in seen:
            log.info("duplicate message %s/%s", *key)
            continue
        seen.add(key)
        session_id = entry.item.session_id
        head = heads.get(session_id)
        if head is None:
            _skip(entry.item, f"no session {session_id}")
            continue
        chain = chains.get(session_id)
        if chain is None:
            leaf = head.active_leaf_id
            last = head.alias_root_base if leaf is None else head.parent_last
            missing = leaf is not None and last is None
            chain = chains[session_id] = _Chain(leaf, last or 0, slow=missing)
        if chain.slow or (session_id, entry.first) in on_record:
            chain.slow = True  # this session's remaining items go one by one, in order
            outcome.later.append(entry)
            continue
        fast.append((entry, chain))
    if not fast:
        return outcome

    if postgres:
        ids = [row[0] for row in await conn.execute(_PG_RECORD_IDS, {"n": len(fast)})]
    else:
        top = int((await conn.execute(_MAX_RECORD_ID)).scalar_one())
        ids = list(range(top + 1, top + 1 + len(fast)))
    records: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    leaves: dict[int, int] = {}
    for (entry, chain), new_id in zip(fast, ids, strict=True):
        derived = derive(chain.last, entry.first, seq_on_path=None)  # first id is new here
        seq, last = derived.seq, derived.last
        item = entry.item
        records.append(
            {
                "id": new_id,
                "session_id": item.session_id,
                "parent_id": chain.parent,
                "kind": item.record.body.kind,
                "created_at": entry.created_at,
                "payload": entry.payload,
                "tokens": item.record.tokens,
                "first_message_id": entry.first,
                "message_ids": entry.message_ids,
                "alias_seq": seq,
                "alias_last": last,
            }
        )
        messages.append({**entry.message_row, "record_id": new_id})
        outcome.stored[entry.index] = StoredRecord(
            id=new_id,
            session_id=item.session_id,
            parent_id=chain.parent,
            created_at=entry.created_at,
            body=item.record.body,
            message_ids=item.record.message_ids,
            tokens=item.record.tokens,
            alias_seq=seq,
            alias_parts=alias_parts(seq, item.record.message_ids),
        )
        chain.parent, chain.last = new_id, last
        leaves[item.session_id] = new_id
    await conn.execute(_INSERT_RECORDS, records)
    await conn.execute(_INSERT_MESSAGES, messages)
    await index_platform_messages(
        conn, ((m["chat_id"], m["thread_id"], m["message_id"], m["text"]) for m in messages)
    )
    await conn.execute(
        _MOVE_LEAF,
        [{"session_id": sid, "leaf_id": leaf, "now": now} for sid, leaf in leaves.items()],
    )
    return outcome
