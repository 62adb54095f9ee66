"""`SqlStore`: sessions, record trees, platform events and claims on SQLite or PostgreSQL.

Loading follows the window, not the history. `load_history` walks the active path from
the leaf back to the window start (at most `max_records` rows) with a recursive CTE on
`parent_id`, one primary-key lookup per record, so its cost does not grow with the session.

Aliases (DESIGN.md §3.6) are ordinals over the whole active path. Because a record's path
from the root is fixed, its ordinal depends only on its ancestors, never on which leaf is
active: each record caches `alias_seq` (its ordinal) and `alias_last` (the highest ordinal
on root → record) as derived columns, written when the record is appended:

- a record without a confirmed id: no ordinal, `alias_last` = the parent's;
- a record whose first id already appears on its path (found through the
  `(session_id, first_message_id)` index, then an ancestry walk that stops at that older
  record): the earlier ordinal;
- otherwise the parent's `alias_last + 1`.

So switching branches or moving the window costs nothing, and `next_alias_seq` is the leaf's
`alias_last + 1`. `set_message_ids` re-derives the record, and its descendants only when
its first id changed. Rows whose cache is missing (`alias_last IS NULL`: bulk imports,
rows written by an older version) are repaired on first read by one pass over the path that
reads only id, parent_id and the small `message_ids` column (never payloads), with
`bot.context.aliases.AliasCounter`. Writers that touch aliases lock the session row
(`FOR UPDATE` on PostgreSQL, `BEGIN IMMEDIATE` on SQLite), so derivations never race.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.context.aliases import AliasCounter
from bot.domain.ids import Scene, SessionKey
from bot.domain.records import StoredRecord
from bot.errors import SessionNotFound, StorageError, StorageUnavailable
from bot.ports import (
    ConversationStore,
    HistoryStore,
    InboundAppend,
    LoadedHistory,
    NewRecord,
    PlatformEvent,
    PlatformEventStore,
    SessionInfo,
    SessionRequest,
    UpdateLog,
)
from storage.codec import (
    decode_media,
    decode_message_ids,
    decode_payload,
    encode_media,
    encode_message_ids,
    encode_payload,
    first_message_id,
    with_message_ids,
)
from storage.engine import ONE_STATEMENT, WRITE
from storage.inbound_batch import InboundBatchWriter
from storage.retention import Node, PruneResult, plan_prune
from storage.tables import EVENTS, MESSAGES, SESSIONS, SUMMARIES, UPDATES

_RECORD_COLUMNS = (
    MESSAGES.c.id,
    MESSAGES.c.session_id,
    MESSAGES.c.parent_id,
    MESSAGES.c.created_at,
    MESSAGES.c.payload,
    MESSAGES.c.tokens,
    MESSAGES.c.alias_seq,
    MESSAGES.c.alias_last,
)
_ALIAS_COLUMNS = (
    MESSAGES.c.id,
    MESSAGES.c.parent_id,
    MESSAGES.c.message_ids,
    MESSAGES.c.alias_seq,
    MESSAGES.c.alias_last,
)
_DELETE_CHUNK = 500


def utc(value: datetime) -> datetime:
    """Aware UTC; a naive value (SQLite hands those back) is taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def alias_parts(seq: int | None, message_ids: Sequence[int | None]) -> tuple[str | None, ...]:
    """The per-slot aliases of a record whose ordinal is `seq`."""
    if seq is None:
        return (None,) * len(message_ids)
    return AliasCounter(seq - 1).assign(message_ids).parts


class _WriteGate:
    """Queues this process's SQLite writers in order, before they take a connection.

    SQLite has one writer at a time; a second `BEGIN IMMEDIATE` waits in SQLite's busy
    handler, which polls with sleeps of up to 100 ms, and holds a pooled connection while it
    waits. Waiting here instead hands the lock over as soon as the writer before commits.
    Other processes on the same file still meet at `BEGIN IMMEDIATE` and its busy timeout.
    """

    __slots__ = ("_lock", "_loop")

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def hold(self) -> asyncio.Lock:
        """The lock of the running event loop (an asyncio lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock


@dataclass(frozen=True, slots=True)
class _Derived:
    seq: int | None
    last: int


class SqlStore:
    """HistoryStore + PlatformEventStore + UpdateLog over one async SQLAlchemy engine.

    The schema comes from `storage.migrate.upgrade_database`; this class never creates it.
    Database failures surface as `StorageError`; unknown sessions or records as
    `SessionNotFound`.
    """

    def __init__(self, engine: AsyncEngine, *, now: Callable[[], datetime] | None = None) -> None:
        self._engine = engine
        self._now = now or (lambda: datetime.now(UTC))
        self._gate = _WriteGate() if engine.dialect.name == "sqlite" else None
        self._batches = InboundBatchWriter(self._write, self._append_inbound_one, self._now)

    async def close(self) -> None:
        await self._engine.dispose()

    # ------------------------------------------------------------ transactions

    @asynccontextmanager
    async def _read(self, *, one_statement: bool = False) -> AsyncIterator[AsyncConnection]:
        """A read-only connection; `one_statement` when it runs a single statement (which
        is then its own transaction: SQLite skips the `BEGIN`)."""
        try:
            async with self._engine.connect() as conn:
                if one_statement:
                    await conn.execution_options(**ONE_STATEMENT)
                yield conn
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"database read failed: {exc}") from exc

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        async with self._gate.hold() if self._gate is not None else nullcontext():
            try:
                async with self._engine.connect() as conn:
                    await conn.execution_options(**WRITE)
                    async with conn.begin():
                        yield conn
            except SQLAlchemyError as exc:
                raise StorageUnavailable(f"database write failed: {exc}") from exc

    def _insert(self, conn: AsyncConnection, table: Any) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT."""
        if conn.dialect.name == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    # ------------------------------------------------------------ sessions

    async def open_session(
        self, key: SessionKey, *, scene: Scene, title: str | None = None
    ) -> SessionInfo:
        # Nearly every call finds the session as it is: answer those with one read and
        # keep the write lock for the first message of a chat and for changes.
        known = await self.find_session(key)
        if known is not None and known.scene == scene and title in (None, known.title):
            return known
        now = self._now()
        async with self._write() as conn:
            stmt = (
                self._insert(conn, SESSIONS)
                .values(
                    platform=key.platform,
                    chat_id=key.chat_id,
                    thread_id=key.thread_id,
                    scene=scene,
                    title=title,
                    alias_root_base=0,
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing(index_elements=["platform", "chat_id", "thread_id"])
            )
            await conn.execute(stmt)
            row = (await conn.execute(_SESSION_BY_KEY, _key_params(key))).one()
            changes: dict[str, Any] = {}
            if row.scene != scene:
                changes["scene"] = scene
            if title is not None and row.title != title:
                changes["title"] = title
            if changes:
                await conn.execute(
                    update(SESSIONS)
                    .where(SESSIONS.c.id == row.id)
                    .values(**changes, updated_at=now)
                )
                row = (await conn.execute(_SESSION_BY_KEY, _key_params(key))).one()
            return _session_info(row)

    async def find_session(self, key: SessionKey) -> SessionInfo | None:
        async with self._read(one_statement=True) as conn:
            row = (await conn.execute(_SESSION_BY_KEY, _key_params(key))).first()
        return None if row is None else _session_info(row)

    async def get_session(self, session_id: int) -> SessionInfo:
        async with self._read(one_statement=True) as conn:
            return _session_info(await _session_row(conn, session_id))

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        async with self._read(one_statement=True) as conn:
            rows = (await conn.execute(select(SESSIONS).order_by(SESSIONS.c.id))).all()
        return tuple(_session_info(row) for row in rows)

    async def set_route(self, session_id: int, route: str | None) -> None:
        async with self._write() as conn:
            await _session_row(conn, session_id, lock=True)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(route=route, updated_at=self._now())
            )

    async def set_active_leaf(self, session_id: int, record_id: int) -> None:
        async with self._write() as conn:
            await _session_row(conn, session_id, lock=True)
            await _require_record(conn, session_id, record_id)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(active_leaf_id=record_id, updated_at=self._now())
            )

    async def set_window_start(self, session_id: int, record_id: int | None) -> None:
        async with self._write() as conn:
            await _session_row(conn, session_id, lock=True)
            if record_id is not None:
                await _require_record(conn, session_id, record_id)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(window_start_id=record_id, updated_at=self._now())
            )

    # ------------------------------------------------------------ records

    async def load_history(self, session_id: int, *, max_records: int) -> LoadedHistory:
        for _attempt in range(2):
            async with self._read() as conn:
                srow = await _session_row(conn, session_id)
                session = _session_info(srow)
                if session.active_leaf_id is None:
                    return LoadedHistory(
                        session=session,
                        records=(),
                        has_earlier=False,
                        next_alias_seq=srow.alias_root_base + 1,
                    )
                stop = session.window_start_id
                walk = _walk_up("records", stop=stop is not None, limit=True)
                params = _walk_params(
                    session.active_leaf_id, stop_at=stop, limit=max(1, max_records)
                )
                rows = (await conn.execute(walk, params)).all()
            if any(row.alias_last is None for row in rows):
                await self._repair_path(session_id, session.active_leaf_id)
                continue
            kept = rows[-max_records:] if max_records > 0 else []
            return LoadedHistory(
                session=session,
                records=tuple(_stored(row) for row in kept),
                has_earlier=(kept[0].parent_id is not None) if kept else bool(rows),
                next_alias_seq=rows[-1].alias_last + 1,
            )
        raise StorageError(f"aliases of session {session_id} could not be repaired")

    async def find_aliases(self, session_id: int, message_ids: Collection[int]) -> dict[int, str]:
        """Aliases (`m<n>`) of the session's records whose first platform id is one of
        `message_ids`; the first record wins. One indexed query, whatever the history size."""
        wanted = sorted(set(message_ids))
        if not wanted:
            return {}
        query = (
            select(MESSAGES.c.first_message_id, MESSAGES.c.alias_seq)
            .where(
                MESSAGES.c.session_id == session_id,
                MESSAGES.c.first_message_id.in_(wanted),
                MESSAGES.c.alias_seq.is_not(None),
            )
            .order_by(MESSAGES.c.id)
        )
        async with self._read(one_statement=True) as conn:
            rows = (await conn.execute(query)).all()
        found: dict[int, str] = {}
        for row in rows:
            found.setdefault(int(row.first_message_id), f"m{row.alias_seq}")
        return found

    async def load_path(
        self, session_id: int, leaf_id: int | None = None
    ) -> tuple[StoredRecord, ...]:
        """The whole branch root → `leaf_id` (the active leaf by default), with aliases."""
        for _attempt in range(2):
            async with self._read() as conn:
                srow = await _session_row(conn, session_id)
                leaf = srow.active_leaf_id if leaf_id is None else leaf_id
                if leaf is None:
                    return ()
                await _require_record(conn, session_id, leaf)
                rows = (await conn.execute(_walk_up("records"), _walk_params(leaf))).all()
            if any(row.alias_last is None for row in rows):
                await self._repair_path(session_id, leaf)
                continue
            return tuple(_stored(row) for row in rows)
        raise StorageError(f"aliases of session {session_id} could not be repaired")

    async def get_record(self, record_id: int) -> StoredRecord | None:
        """One record with its aliases (those of its own path), or None."""
        for _attempt in range(2):
            async with self._read(one_statement=True) as conn:
                row = (await conn.execute(_RECORD_BY_ID, {"record_id": record_id})).first()
            if row is None:
                return None
            if row.alias_last is None:
                await self._repair_path(row.session_id, record_id)
                continue
            return _stored(row)
        raise StorageError(f"aliases of record {record_id} could not be repaired")

    async def append(
        self,
        session_id: int,
        records: Sequence[NewRecord],
        *,
        parent_id: int | None = None,
        events: Sequence[PlatformEvent] = (),
        move_leaf: bool = True,
        at_root: bool = False,
    ) -> tuple[StoredRecord, ...]:
        if not records:
            raise ValueError("append needs at least one record")
        first = first_message_id(records[0].message_ids)
        async with self._write() as conn:
            if conn.dialect.name != "sqlite":  # SQLite: `BEGIN IMMEDIATE` locked already
                await _session_row(conn, session_id, lock=True)
            head = (
                await conn.execute(
                    _APPEND_HEAD,
                    {"session_id": session_id, "parent_id": parent_id, "first": first},
                )
            ).first()
            if head is None:
                raise SessionNotFound(f"no session {session_id}")
            parent = None if at_root else head.active_leaf_id if parent_id is None else parent_id
            last = head.alias_root_base
            earliest = head.earliest
            if parent is not None:
                if head.parent_row is None:
                    raise SessionNotFound(f"no record {parent} in session {session_id}")
                last = head.parent_last
                if last is None:
                    await _repair(conn, head, parent)
                    last = (await _require_record(conn, session_id, parent)).alias_last
            stored: list[StoredRecord] = []
            for index, record in enumerate(records):
                if index == 0:
                    derived = await _derived(conn, parent, last, first, earliest=earliest)
                else:
                    first = first_message_id(record.message_ids)
                    derived = await _derive(conn, session_id, parent, last, first)
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
                new_id = (await conn.execute(_INSERT_RECORD, values)).scalar_one()
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
            if events:
                await self._write_events(conn, events, default_record_id=stored[-1].id)
            if move_leaf:
                params = {"session_id": session_id, "leaf_id": stored[-1].id, "now": self._now()}
                await conn.execute(_MOVE_LEAF, params)
        return tuple(stored)

    # ------------------------------------------------------------ group commit

    async def open_sessions(self, requests: Sequence[SessionRequest]) -> tuple[SessionInfo, ...]:
        """One read for the known sessions; `open_session` for new or changed ones."""
        chat_ids = sorted({r.key.chat_id for r in requests})
        async with self._read(one_statement=True) as conn:
            rows = await conn.execute(_SESSIONS_OF_CHATS, {"chat_ids": chat_ids})
            known = {_session_info(row).key: _session_info(row) for row in rows}
        opened: list[SessionInfo] = []
        for request in requests:
            info = known.get(request.key)
            if (
                info is None
                or info.scene != request.scene
                or request.title
                not in (
                    None,
                    info.title,
                )
            ):
                info = await self.open_session(
                    request.key, scene=request.scene, title=request.title
                )
                known[request.key] = info
            opened.append(info)
        return tuple(opened)

    async def append_inbound(
        self, items: Sequence[InboundAppend]
    ) -> tuple[StoredRecord | None, ...]:
        """See `bot.ports.InboundBatchStore` and `storage.inbound_batch`."""
        return await self._batches.append(items)

    async def _append_inbound_one(self, item: InboundAppend) -> StoredRecord | None:
        if await self.find_event(item.event.chat_id, item.event.message_id) is not None:
            return None
        (stored,) = await self.append(item.session_id, [item.record], events=[item.event])
        return stored

    async def set_message_ids(
        self, record_id: int, message_ids: Sequence[int | None]
    ) -> StoredRecord:
        """Record the confirmed bubbles of a record (`messageId`/`messageIds` and columns)."""
        ids = tuple(message_ids)
        async with self._write() as conn:
            query = select(MESSAGES.c.session_id, MESSAGES.c.payload, MESSAGES.c.first_message_id)
            row = (await conn.execute(query.where(MESSAGES.c.id == record_id))).first()
            if row is None:
                raise SessionNotFound(f"no record {record_id}")
            srow = await _session_row(conn, row.session_id, lock=True)
            first = first_message_id(ids)
            await conn.execute(
                update(MESSAGES)
                .where(MESSAGES.c.id == record_id)
                .values(
                    payload=with_message_ids(row.payload, ids),
                    message_ids=encode_message_ids(ids),
                    first_message_id=first,
                )
            )
            if first != row.first_message_id:
                await _rederive_subtree(conn, srow, record_id)
            result = (
                await conn.execute(select(*_RECORD_COLUMNS).where(MESSAGES.c.id == record_id))
            ).one()
            if result.alias_last is None:
                await _repair(conn, srow, record_id)
                result = (
                    await conn.execute(select(*_RECORD_COLUMNS).where(MESSAGES.c.id == record_id))
                ).one()
        return _stored(result)

    async def _repair_path(self, session_id: int, leaf_id: int) -> None:
        async with self._write() as conn:
            srow = await _session_row(conn, session_id, lock=True)
            await _repair(conn, srow, leaf_id)

    # ------------------------------------------------------------ platform events

    async def record_events(self, events: Sequence[PlatformEvent]) -> None:
        if not events:
            return
        async with self._write() as conn:
            await self._write_events(conn, events, default_record_id=None)

    async def find_event(self, chat_id: int, message_id: int) -> PlatformEvent | None:
        async with self._read(one_statement=True) as conn:
            params = {"chat_id": chat_id, "message_id": message_id}
            row = (await conn.execute(_EVENT_BY_KEY, params)).first()
        return None if row is None else _event(row)

    async def _write_events(
        self,
        conn: AsyncConnection,
        events: Sequence[PlatformEvent],
        *,
        default_record_id: int | None,
    ) -> None:
        stmt = _upsert_events(conn.dialect.name)
        rows = [
            {
                "chat_id": e.chat_id,
                "message_id": e.message_id,
                "thread_id": e.thread_id,
                "sender_id": e.sender_id,
                "sender_name": e.sender_name,
                "is_bot": e.is_bot,
                "date": utc(e.date),
                "text": e.text,
                "media": encode_media(e.media),
                "reply_to_message_id": e.reply_to_message_id,
                "record_id": e.record_id if e.record_id is not None else default_record_id,
                "edited_at": None if e.edited_at is None else utc(e.edited_at),
            }
            for e in events
        ]
        await conn.execute(stmt, rows)

    # ------------------------------------------------------------ claims

    async def claim_update(self, update_id: int) -> bool:
        async with self._write() as conn:
            stmt = (
                self._insert(conn, UPDATES)
                .values(update_id=update_id, processed_at=self._now())
                .on_conflict_do_nothing(index_elements=["update_id"])
                .returning(UPDATES.c.update_id)
            )
            return (await conn.execute(stmt)).first() is not None

    async def claim_daily_summary(self, day: date) -> bool:
        async with self._write() as conn:
            stmt = (
                self._insert(conn, SUMMARIES)
                .values(day=day, claimed_at=self._now())
                .on_conflict_do_nothing(index_elements=["day"])
                .returning(SUMMARIES.c.day)
            )
            return (await conn.execute(stmt)).first() is not None

    # ------------------------------------------------------------ retention

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> PruneResult:
        """Apply the policy of `storage.retention`; events default to the same cutoff."""
        cutoff = utc(older_than)
        events_cutoff = cutoff if events_older_than is None else utc(events_older_than)
        removed = 0
        async with self._write() as conn:
            sessions = (await conn.execute(select(SESSIONS).order_by(SESSIONS.c.id))).all()
            for srow in sessions:
                if srow.window_start_id is None or srow.active_leaf_id is None:
                    continue
                removed += await _prune_session(conn, srow, cutoff)
            events = await conn.execute(delete(EVENTS).where(EVENTS.c.date < events_cutoff))
            updates = await conn.execute(
                delete(UPDATES).where(UPDATES.c.processed_at < events_cutoff)
            )
        return PruneResult(records=removed, events=events.rowcount, updates=updates.rowcount)


# ---------------------------------------------------------------- queries


# Hot statements are built once, with bound parameters: building a construct and its
# cache key costs more than running the compiled SQL does. Parameter names differ from
# column names where SQLAlchemy reserves those (INSERT and UPDATE).

_SESSION_BY_KEY = select(SESSIONS).where(
    SESSIONS.c.platform == bindparam("platform"),
    SESSIONS.c.chat_id == bindparam("chat_id"),
    SESSIONS.c.thread_id == bindparam("thread_id"),
)
_SESSIONS_OF_CHATS = select(SESSIONS).where(
    SESSIONS.c.chat_id.in_(bindparam("chat_ids", expanding=True))
)
_SESSION_BY_ID = select(SESSIONS).where(SESSIONS.c.id == bindparam("session_id"))
_SESSION_BY_ID_LOCKED = _SESSION_BY_ID.with_for_update()
_RECORD_IN_SESSION = select(MESSAGES.c.id, MESSAGES.c.alias_last).where(
    MESSAGES.c.id == bindparam("record_id"), MESSAGES.c.session_id == bindparam("session_id")
)
_RECORD_BY_ID = select(*_RECORD_COLUMNS).where(MESSAGES.c.id == bindparam("record_id"))
_EARLIEST_WITH_FIRST = select(func.min(MESSAGES.c.id)).where(
    MESSAGES.c.session_id == bindparam("session_id"),
    MESSAGES.c.first_message_id == bindparam("first"),
    MESSAGES.c.id <= bindparam("parent_id"),
)
_EVENT_BY_KEY = select(EVENTS).where(
    EVENTS.c.chat_id == bindparam("chat_id"), EVENTS.c.message_id == bindparam("message_id")
)
_INSERT_RECORD = insert(MESSAGES).returning(MESSAGES.c.id)
_MOVE_LEAF = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("session_id"))
    .values(active_leaf_id=bindparam("leaf_id"), updated_at=bindparam("now"))
)


def _append_head() -> Select[Any]:
    """What `append` needs before its first insert, in one round trip: the session row; the
    parent (`parent_id`, or the active leaf when that is NULL) as `parent_row` and
    `parent_last`; and as `earliest` the oldest record of the session up to the parent
    whose first platform id is `first` (see `_derive`).

    No `FOR UPDATE` here: PostgreSQL re-reads a row lock's row after waiting for it, but not
    the rows joined to it, so the session row is locked by a statement before this one."""
    parent = MESSAGES.alias("parent")
    earlier = MESSAGES.alias("earlier")
    parent_id = func.coalesce(bindparam("parent_id", type_=BigInteger), SESSIONS.c.active_leaf_id)
    earliest = (
        select(func.min(earlier.c.id))
        .where(
            earlier.c.session_id == SESSIONS.c.id,
            earlier.c.first_message_id == bindparam("first", type_=BigInteger),
            earlier.c.id <= parent.c.id,
        )
        .scalar_subquery()
    )
    joined = SESSIONS.outerjoin(
        parent, and_(parent.c.id == parent_id, parent.c.session_id == SESSIONS.c.id)
    )
    return (
        select(
            SESSIONS,
            parent.c.id.label("parent_row"),
            parent.c.alias_last.label("parent_last"),
            earliest.label("earliest"),
        )
        .select_from(joined)
        .where(SESSIONS.c.id == bindparam("session_id"))
    )


_APPEND_HEAD = _append_head()


@functools.cache
def _upsert_events(dialect: str) -> Any:
    """Insert platform events, or update the known ones (keeping their record and edit
    time when the new row has none)."""
    stmt = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(EVENTS)
    return stmt.on_conflict_do_update(
        index_elements=["chat_id", "message_id"],
        set_={
            "thread_id": stmt.excluded.thread_id,
            "sender_id": stmt.excluded.sender_id,
            "sender_name": stmt.excluded.sender_name,
            "is_bot": stmt.excluded.is_bot,
            "text": stmt.excluded.text,
            "media": stmt.excluded.media,
            "reply_to_message_id": stmt.excluded.reply_to_message_id,
            "record_id": func.coalesce(stmt.excluded.record_id, EVENTS.c.record_id),
            "edited_at": func.coalesce(stmt.excluded.edited_at, EVENTS.c.edited_at),
        },
    )


def _key_params(key: SessionKey) -> dict[str, Any]:
    return {"platform": key.platform, "chat_id": key.chat_id, "thread_id": key.thread_id}


async def _session_row(conn: AsyncConnection, session_id: int, *, lock: bool = False) -> Any:
    query = _SESSION_BY_ID_LOCKED if lock else _SESSION_BY_ID
    row = (await conn.execute(query, {"session_id": session_id})).first()
    if row is None:
        raise SessionNotFound(f"no session {session_id}")
    return row


async def _require_record(conn: AsyncConnection, session_id: int, record_id: int) -> Any:
    params = {"record_id": record_id, "session_id": session_id}
    row = (await conn.execute(_RECORD_IN_SESSION, params)).first()
    if row is None:
        raise SessionNotFound(f"no record {record_id} in session {session_id}")
    return row


def _walk_params(
    leaf_id: int, *, stop_at: int | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The parameters of `_walk_up(..., stop=stop_at is not None, limit=limit is not None)`."""
    params: dict[str, Any] = {"leaf_id": leaf_id}
    if stop_at is not None:
        params["stop_at"] = stop_at
    if limit is not None:
        params["limit"] = limit
    return params


@functools.cache
def _walk_up(
    columns: Literal["records", "aliases"], *, stop: bool = False, limit: bool = False
) -> Select[Any]:
    """Rows of the path ending at record `leaf_id`, oldest first: back to `stop_at`
    (included) when `stop`, else the root; at most `limit` rows when `limit` (parameters
    from `_walk_params`). A recursive CTE: one primary-key lookup per row."""
    walk = (
        select(
            MESSAGES.c.id,
            MESSAGES.c.parent_id,
            literal_column("1", Integer).label("depth"),
        )
        .where(MESSAGES.c.id == bindparam("leaf_id"))
        .cte("walk", recursive=True)
    )
    step = select(MESSAGES.c.id, MESSAGES.c.parent_id, (walk.c.depth + 1).label("depth")).join(
        walk, MESSAGES.c.id == walk.c.parent_id
    )
    if stop:
        step = step.where(walk.c.id != bindparam("stop_at"))
    if limit:
        step = step.where(walk.c.depth < bindparam("limit"))
    walk = walk.union_all(step)
    wanted = _RECORD_COLUMNS if columns == "records" else _ALIAS_COLUMNS
    return select(*wanted).join(walk, MESSAGES.c.id == walk.c.id).order_by(walk.c.depth.desc())


async def _derive(
    conn: AsyncConnection,
    session_id: int,
    parent_id: int | None,
    parent_last: int,
    first: int | None,
) -> _Derived:
    """A record's alias columns from its parent's (see the module docstring)."""
    if first is None or parent_id is None:
        return await _derived(conn, parent_id, parent_last, first, earliest=None)
    params = {"session_id": session_id, "first": first, "parent_id": parent_id}
    earliest = await conn.scalar(_EARLIEST_WITH_FIRST, params)
    return await _derived(conn, parent_id, parent_last, first, earliest=earliest)


async def _derived(
    conn: AsyncConnection,
    parent_id: int | None,
    parent_last: int,
    first: int | None,
    *,
    earliest: int | None,
) -> _Derived:
    """`_derive` once `earliest` is known: the oldest record of the session up to the
    parent whose first platform id is `first` (None when there is none)."""
    if first is None:
        return _Derived(None, parent_last)
    if parent_id is not None and earliest is not None:
        seq = await _seq_on_path(conn, parent_id, first, down_to=earliest)
        if seq is not None:
            return _Derived(seq, parent_last)
    return _Derived(parent_last + 1, parent_last + 1)


async def _seq_on_path(
    conn: AsyncConnection, leaf_id: int, first: int, *, down_to: int
) -> int | None:
    """The ordinal of `first` on the path ending at `leaf_id`, looking no further back than
    record `down_to` (ids grow from parent to child, so older ancestors cannot match)."""
    walk = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id)
        .where(MESSAGES.c.id == leaf_id)
        .cte("up", recursive=True)
    )
    step = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id)
        .join(walk, MESSAGES.c.id == walk.c.parent_id)
        .where(MESSAGES.c.id >= down_to)
    )
    walk = walk.union_all(step)
    query = (
        select(MESSAGES.c.alias_seq)
        .join(walk, MESSAGES.c.id == walk.c.id)
        .where(MESSAGES.c.first_message_id == first, MESSAGES.c.alias_seq.is_not(None))
        .limit(1)
    )
    value = await conn.scalar(query)
    return None if value is None else int(value)


async def _rederive_subtree(conn: AsyncConnection, srow: Any, record_id: int) -> None:
    """Re-derive a record whose first id changed, then its descendants in id order."""
    row = (
        await conn.execute(
            select(MESSAGES.c.parent_id, MESSAGES.c.first_message_id).where(
                MESSAGES.c.id == record_id
            )
        )
    ).one()
    if row.parent_id is None:
        parent_last: int | None = srow.alias_root_base
    else:
        parent_last = await conn.scalar(
            select(MESSAGES.c.alias_last).where(MESSAGES.c.id == row.parent_id)
        )
    if parent_last is None:
        await _repair(conn, srow, record_id)
        parent_last = await conn.scalar(
            select(MESSAGES.c.alias_last).where(MESSAGES.c.id == row.parent_id)
        )
        assert parent_last is not None
    down = select(MESSAGES.c.id).where(MESSAGES.c.id == record_id).cte("down", recursive=True)
    down = down.union_all(select(MESSAGES.c.id).join(down, MESSAGES.c.parent_id == down.c.id))
    subtree = (
        await conn.execute(
            select(MESSAGES.c.id, MESSAGES.c.parent_id, MESSAGES.c.first_message_id)
            .where(MESSAGES.c.id.in_(select(down.c.id)))
            .order_by(MESSAGES.c.id)
        )
    ).all()
    last_of: dict[int | None, int] = {row.parent_id: parent_last}
    for node in subtree:
        derived = await _derive(
            conn, srow.id, node.parent_id, last_of[node.parent_id], node.first_message_id
        )
        last_of[node.id] = derived.last
        await conn.execute(
            update(MESSAGES)
            .where(MESSAGES.c.id == node.id)
            .values(alias_seq=derived.seq, alias_last=derived.last)
        )


async def _repair(conn: AsyncConnection, srow: Any, leaf_id: int) -> None:
    """Recompute the alias columns of the whole path root → `leaf_id` in one pass."""
    rows = (await conn.execute(_walk_up("aliases"), _walk_params(leaf_id))).all()
    counter = AliasCounter(srow.alias_root_base)
    changed: list[dict[str, Any]] = []
    for row in rows:
        ids = decode_message_ids(row.message_ids) if row.message_ids != "[]" else ()
        seq = counter.assign(ids).seq
        if (seq, counter.last_seq) != (row.alias_seq, row.alias_last):
            changed.append({"rid": row.id, "seq": seq, "last": counter.last_seq})
    if changed:
        stmt = (
            update(MESSAGES)
            .where(MESSAGES.c.id == bindparam("rid"))
            .values(alias_seq=bindparam("seq"), alias_last=bindparam("last"))
        )
        await conn.execute(stmt, changed)


async def _prune_session(conn: AsyncConnection, srow: Any, cutoff: datetime) -> int:
    rows = (
        await conn.execute(
            select(MESSAGES.c.id, MESSAGES.c.parent_id, MESSAGES.c.created_at).where(
                MESSAGES.c.session_id == srow.id
            )
        )
    ).all()
    plan = plan_prune(
        (Node(row.id, row.parent_id, utc(row.created_at)) for row in rows),
        active_leaf_id=srow.active_leaf_id,
        window_start_id=srow.window_start_id,
        older_than=cutoff,
    )
    if not plan.delete:
        return 0
    base = await conn.scalar(
        select(MESSAGES.c.alias_last).where(MESSAGES.c.id == plan.last_removed)
    )
    if base is None:
        await _repair(conn, srow, srow.active_leaf_id)
        base = await conn.scalar(
            select(MESSAGES.c.alias_last).where(MESSAGES.c.id == plan.last_removed)
        )
    await conn.execute(
        update(SESSIONS).where(SESSIONS.c.id == srow.id).values(alias_root_base=base or 0)
    )
    await conn.execute(
        update(MESSAGES).where(MESSAGES.c.id == plan.new_root).values(parent_id=None)
    )
    # Children before parents: ids grow from parent to child.
    doomed = sorted(plan.delete, reverse=True)
    for start in range(0, len(doomed), _DELETE_CHUNK):
        chunk = doomed[start : start + _DELETE_CHUNK]
        await conn.execute(delete(MESSAGES).where(MESSAGES.c.id.in_(chunk)))
    return len(doomed)


# ---------------------------------------------------------------- row mapping


def _session_info(row: Any) -> SessionInfo:
    return SessionInfo(
        id=row.id,
        key=SessionKey(platform=row.platform, chat_id=row.chat_id, thread_id=row.thread_id),
        scene=row.scene,
        title=row.title,
        active_leaf_id=row.active_leaf_id,
        window_start_id=row.window_start_id,
        route=row.route,
    )


def _stored(row: Any) -> StoredRecord:
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


def _event(row: Any) -> PlatformEvent:
    return PlatformEvent(
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


def _satisfies_the_ports(
    store: SqlStore,
) -> tuple[HistoryStore, PlatformEventStore, UpdateLog, ConversationStore]:
    """Checked by mypy: the store implements the three ports of `bot.ports`."""
    return store, store, store, store
