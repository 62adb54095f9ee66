"""`SqlStore`: sessions, record trees, platform messages and claims on SQLite or PostgreSQL.

Loading follows the window, not the history. `load_history` walks the active path from
the leaf back to the window start (at most `max_records` rows) with a recursive CTE on
`parent_id`, one primary-key lookup per record, so its cost does not grow with the session.

Aliases (docs/architecture.md, Aliases) come from the alias cache of each record
(`storage.alias_cache`), kept up to date by the writers here. Writers that touch aliases
lock the session row (`FOR UPDATE` on PostgreSQL, `BEGIN IMMEDIATE` on SQLite), so
derivations never race.
The SQL built once lives in `storage.queries`. On SQLite the statements of every answered
message (the window read, a reply's append, a few one-statement reads) run through
`storage.sqlite_driver.FastSqlite`: one job on the connection's thread each, without SQLAlchemy's
per-statement path; PostgreSQL, and everything else, go through SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager, nullcontext
from datetime import UTC, date, datetime
from functools import partial
from typing import Any, TypeVar, cast

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.domain.ids import Scene, SessionKey
from bot.domain.records import StoredRecord
from bot.errors import SessionNotFound, StorageError, StorageUnavailable
from bot.ports import (
    SYSTEM_CLOCK,
    Clock,
    InboundAppend,
    LoadedHistory,
    LoadedTurn,
    NewRecord,
    PlatformMessage,
    SessionInfo,
    SessionRequest,
    StoredReaction,
)
from bot.store_ports import ConversationStore
from storage.alias_cache import (
    aliases_on_path,
    message_ids_of,
    rederive_subtree,
    repair_path,
)
from storage.codec import (
    DecodedRecords,
    encode_message_ids,
    first_message_id,
    latest_reactions,
    platform_message_from_row,
    platform_message_row,
    reaction_of,
    reaction_row,
    session_info,
    session_of,
    stored_reaction,
    stored_record,
    utc,
    with_message_ids,
)
from storage.engine import ONE_STATEMENT, WRITE
from storage.erase import erase_rows
from storage.executor import parts_for, run_plan
from storage.inbound_batch import InboundBatchWriter
from storage.plan import Plan, Rows, SqlParts, first_row
from storage.queries import (
    ALIASES_WANTED,
    CLOSED_SESSION_OF_CHAT,
    PLATFORM_MESSAGE_BY_KEY,
    REACTION_PART,
    REACTIONS_SINCE,
    RECORD_COLUMNS,
    RECORD_PART,
    SESSION_BY_ID,
    SESSION_BY_KEY,
    SESSION_PART,
    SESSIONS_AWAITING_ANSWER,
    SESSIONS_OF_CHATS,
    SUMMARY_PART,
    key_params,
    not_by_session,
    require_record,
    session_row,
    walk_params,
    walk_up,
    window_load,
)
from storage.reconnect import FirstStatementRetry
from storage.record_write import Append, append_plan
from storage.retention import PruneResult
from storage.search import (
    search_platform_message_rows,
)
from storage.sql_prune import prune_rows
from storage.sqlite_driver import WriteGate, for_engine
from storage.tables import MESSAGES, REACTIONS, SESSIONS, SUMMARIES, UPDATES

T = TypeVar("T")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DROP_REACTION = delete(REACTIONS).where(
    REACTIONS.c.chat_id == bindparam("r_chat"),
    REACTIONS.c.message_id == bindparam("r_message"),
    REACTIONS.c.user_id == bindparam("r_user"),
    REACTIONS.c.emoji == bindparam("r_emoji"),
)


def _reaction_key(reaction: StoredReaction) -> dict[str, Any]:
    return {
        "r_chat": reaction.chat_id,
        "r_message": reaction.message_id,
        "r_user": reaction.user_id,
        "r_emoji": reaction.emoji,
    }


class SqlStore:
    """`bot.store_ports.ConversationStore` over one async SQLAlchemy engine.

    The schema comes from `storage.migrate.upgrade_database`; this class never creates it.
    Database failures surface as `StorageError`; unknown sessions or records as
    `SessionNotFound`.
    """

    def __init__(self, engine: AsyncEngine, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._engine = engine
        self._now = clock.now
        self._gate = WriteGate() if engine.dialect.name == "sqlite" else None
        self._retry = engine.dialect.name == "postgresql"
        self._fast = for_engine(engine, self._gate)
        """SQLite under `storage.sqlite_driver`: the hot reads and writes in one job each."""
        self._parts = parts_for(engine)
        self._batches = InboundBatchWriter(self._write_plan_on_connection, self._parts, self._now)
        self._decoded = DecodedRecords()

    async def close(self) -> None:
        await self._engine.dispose()

    @property
    def engine(self) -> AsyncEngine:
        """The store's engine, for the shared state kept next to it (`storage.rate_limits`)."""
        return self._engine

    # ------------------------------------------------------------ transactions

    @asynccontextmanager
    async def _read(self, *, one_statement: bool = False) -> AsyncIterator[AsyncConnection]:
        """A read-only connection; `one_statement` when it runs a single statement (which
        is then its own transaction: SQLite skips the `BEGIN`, PostgreSQL runs it in
        autocommit, without the `BEGIN` and `ROLLBACK` round trips around it). On
        PostgreSQL its first statement is run again on a fresh connection if the pooled one
        was dropped (`storage.reconnect`)."""
        try:
            async with self._engine.connect() as conn:
                if one_statement:
                    await conn.execution_options(**ONE_STATEMENT)
                    if self._retry:  # PostgreSQL (asyncpg: a flag, no round trip)
                        await conn.execution_options(isolation_level="AUTOCOMMIT")
                if self._retry:
                    yield cast(AsyncConnection, FirstStatementRetry(conn, begin=False))
                else:
                    yield conn
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"database read failed: {exc}") from exc

    async def _one_read(self, query: Any, params: dict[str, Any]) -> Sequence[Any]:
        """The rows of one read statement: on SQLite one driver job, without SQLAlchemy's
        execution path (`storage.sqlite_driver.FastSqlite`, same values); otherwise
        through `_read(one_statement=True)`."""
        if self._fast is not None:
            prepared = self._fast.prepared(query)
            return await self._fast.read(partial(prepared.rows, values=params))
        async with self._read(one_statement=True) as conn:
            return (await conn.execute(query, params)).all()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a write transaction, committed when the body ends; on PostgreSQL
        its first statement is run again in a fresh transaction on a fresh connection if
        the pooled one was dropped (`storage.reconnect`)."""
        async with self._gate.hold() if self._gate is not None else nullcontext():
            try:
                async with self._engine.connect() as conn:
                    await conn.execution_options(**WRITE)
                    if not self._retry:
                        async with conn.begin():
                            yield conn
                        return
                    # begun and committed here, not by `conn.begin()`'s block: a retry
                    # replaces the transaction that block would commit
                    await conn.begin()
                    yield cast(AsyncConnection, FirstStatementRetry(conn, begin=True))
                    await conn.commit()
            except SQLAlchemyError as exc:
                raise StorageUnavailable(f"database write failed: {exc}") from exc

    async def _write_plan(self, plan: Callable[[], Plan[T]]) -> T:
        """Run a write plan (`storage.plan`, made afresh by `plan`) in one write transaction:
        on SQLite as one `sqlite3` job, otherwise on a SQLAlchemy connection."""
        if self._fast is not None:
            return await self._fast.write_plan(plan)
        return await self._write_plan_on_connection(plan)

    async def _write_plan_on_connection(self, plan: Callable[[], Plan[T]]) -> T:
        """`_write_plan` on a SQLAlchemy connection (a plan with list parameters, which a
        `sqlite3` job does not compile)."""
        async with self._write() as conn:
            return await run_plan(conn, plan())

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
                .returning(*SESSIONS.c)
            )
            # the new row as inserted; the known one read only when another writer made it
            row = (await conn.execute(stmt)).first()
            if row is None:
                row = (await conn.execute(SESSION_BY_KEY, key_params(key))).one()
            changes: dict[str, Any] = {}
            if row.scene != scene:
                changes["scene"] = scene
            if title is not None and row.title != title:
                changes["title"] = title
            if changes:
                changed = (
                    update(SESSIONS)
                    .where(SESSIONS.c.id == row.id)
                    .values(**changes, updated_at=now)
                    .returning(*SESSIONS.c)
                )
                row = (await conn.execute(changed)).one()
            return session_info(row)

    async def find_session(self, key: SessionKey) -> SessionInfo | None:
        rows = await self._one_read(SESSION_BY_KEY, key_params(key))
        return session_info(rows[0]) if rows else None

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        async with self._read(one_statement=True) as conn:
            rows = (await conn.execute(select(SESSIONS).order_by(SESSIONS.c.id))).all()
        return tuple(session_info(row) for row in rows)

    async def sessions_awaiting_answer(self, since: datetime) -> tuple[SessionInfo, ...]:
        async with self._read(one_statement=True) as conn:
            rows = (await conn.execute(SESSIONS_AWAITING_ANSWER, {"since": utc(since)})).all()
        return tuple(session_info(row) for row in rows)

    async def set_route(self, session_id: int, route: str | None) -> None:
        async with self._write() as conn:
            await session_row(conn, session_id, lock=True)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(route=route, updated_at=self._now())
            )

    async def set_active_leaf(self, session_id: int, record_id: int) -> None:
        async with self._write() as conn:
            await session_row(conn, session_id, lock=True)
            await require_record(conn, session_id, record_id)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(active_leaf_id=record_id, updated_at=self._now())
            )

    async def set_window_start(self, session_id: int, record_id: int | None) -> None:
        async with self._write() as conn:
            await session_row(conn, session_id, lock=True)
            if record_id is not None:
                await require_record(conn, session_id, record_id)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(window_start_id=record_id, updated_at=self._now())
            )

    # ------------------------------------------------------------ records

    async def load_history(self, session_id: int, *, max_records: int) -> LoadedHistory:
        """The session row and the window's records in one statement (`window_load`)."""
        history, _summaries, _reactions = await self._load_window(
            session_id, max_records=max_records, summaries=False, reactions_limit=None
        )
        return history

    async def load_turn(
        self, session_id: int, *, max_records: int, reactions_limit: int
    ) -> LoadedTurn:
        """`load_history`, the summary before the window and the window's reactions, in one
        statement (see `bot.ports.LoadedTurn`)."""
        history, summaries, reactions = await self._load_window(
            session_id, max_records=max_records, summaries=True, reactions_limit=reactions_limit
        )
        return LoadedTurn(history=history, summaries=summaries, reactions=reactions)

    async def _load_window(
        self,
        session_id: int,
        *,
        max_records: int,
        summaries: bool,
        reactions_limit: int | None,
    ) -> tuple[LoadedHistory, tuple[StoredRecord, ...], tuple[StoredReaction, ...]]:
        """One round trip, no transaction (a single statement reads one snapshot); again
        after repairing the path's alias cache if a record on it has none."""
        query = window_load(summaries=summaries, reactions=reactions_limit is not None)
        params: dict[str, Any] = {"session_id": session_id, "limit": max(1, max_records)}
        if reactions_limit is not None:
            params["reactions_limit"] = max(0, reactions_limit)
        for _attempt in range(2):
            rows = await self._one_read(query, params)
            if not rows or rows[0].part != SESSION_PART:
                raise SessionNotFound(f"no session {session_id}")
            srow = session_of(rows[0])
            session = session_info(srow)
            walked = [row for row in rows if row.part == RECORD_PART]
            if session.active_leaf_id is None or not walked:
                history = LoadedHistory(
                    session=session,
                    records=(),
                    has_earlier=False,
                    next_alias_seq=srow.alias_root_base + 1,
                )
                return history, (), ()
            if any(row.alias_last is None for row in walked):
                await self._repair_path(session_id, session.active_leaf_id)
                continue
            kept = walked[-max_records:] if max_records > 0 else []
            history = LoadedHistory(
                session=session,
                records=tuple(map(self._decoded.record, kept)),
                has_earlier=(kept[0].parent_id is not None) if kept else bool(walked),
                next_alias_seq=walked[-1].alias_last + 1,
            )
            if not kept:
                return history, (), ()
            found = tuple(stored_record(row) for row in rows if row.part == SUMMARY_PART)
            reacted = tuple(
                stored_reaction(reaction_of(row)) for row in rows if row.part == REACTION_PART
            )
            return history, found, reacted
        raise StorageError(f"aliases of session {session_id} could not be repaired")

    async def find_aliases(self, session_id: int, message_ids: Collection[int]) -> dict[int, str]:
        """Aliases of the platform ids in `message_ids` held by records on the active path
        (`m<n>` for a first id, `m<n>.<slot>` for a later bubble; the earliest record wins).

        Indexes find the records holding them (a later bubble through its platform message);
        the active path is then walked, ids only, from the leaf back to the oldest of them:
        one primary-key lookup per record in between. Records off the active path
        (abandoned branches) give no alias."""
        wanted = sorted(set(message_ids))
        if not wanted:
            return {}
        params = {"session_id": session_id, "wanted": wanted, "wanted_bubbles": wanted}
        for _attempt in range(2):
            async with self._read(one_statement=True) as conn:
                rows = (await conn.execute(ALIASES_WANTED, params)).all()
            if not rows:
                raise SessionNotFound(f"no session {session_id}")
            leaf = rows[0].leaf
            held = [row for row in rows if row.id is not None]
            if leaf is None or not held:
                return {}
            if any(row.alias_last is None for row in held):
                await self._repair_path(session_id, leaf)
                continue
            return aliases_on_path(((row.alias_seq, message_ids_of(row)) for row in held), wanted)
        raise StorageError(f"aliases of session {session_id} could not be repaired")

    async def load_path(
        self, session_id: int, leaf_id: int | None = None
    ) -> tuple[StoredRecord, ...]:
        """The whole branch root → `leaf_id` (the active leaf by default), with aliases."""
        for _attempt in range(2):
            async with self._read() as conn:
                srow = await session_row(conn, session_id)
                leaf = srow.active_leaf_id if leaf_id is None else leaf_id
                if leaf is None:
                    return ()
                await require_record(conn, session_id, leaf)
                rows = (await conn.execute(walk_up("records"), walk_params(leaf))).all()
            if any(row.alias_last is None for row in rows):
                await self._repair_path(session_id, leaf)
                continue
            return tuple(map(self._decoded.record, rows))
        raise StorageError(f"aliases of session {session_id} could not be repaired")

    async def find_summaries(
        self, session_id: int, parent_ids: Collection[int]
    ) -> tuple[StoredRecord, ...]:
        """Summary records hanging under any of `parent_ids`, oldest first."""
        wanted = sorted(set(parent_ids))
        if not wanted:
            return ()
        found: list[StoredRecord] = []
        async with self._read() as conn:
            for begin in range(0, len(wanted), 500):
                query = (
                    select(*RECORD_COLUMNS)
                    .where(
                        not_by_session(session_id),
                        MESSAGES.c.kind == "summary",
                        MESSAGES.c.parent_id.in_(wanted[begin : begin + 500]),
                    )
                    .order_by(MESSAGES.c.id)
                )
                found.extend(stored_record(row) for row in (await conn.execute(query)).all())
        return tuple(sorted(found, key=lambda record: record.id))

    async def append(
        self,
        session_id: int,
        records: Sequence[NewRecord],
        *,
        parent_id: int | None = None,
        platform_messages: Sequence[PlatformMessage] = (),
        move_leaf: bool = True,
        at_root: bool = False,
    ) -> tuple[StoredRecord, ...]:
        append = Append(
            session_id=session_id,
            records=records,
            parent_id=parent_id,
            platform_messages=platform_messages,
            move_leaf=move_leaf,
            at_root=at_root,
            now=self._now(),
        )
        return tuple(await self._write_plan(partial(append_plan, self._parts, append)))

    # ------------------------------------------------------------ group commit

    async def open_sessions(self, requests: Sequence[SessionRequest]) -> tuple[SessionInfo, ...]:
        """One read for the known sessions; `open_session` for new or changed ones."""
        chat_ids = sorted({r.key.chat_id for r in requests})
        async with self._read(one_statement=True) as conn:
            rows = await conn.execute(SESSIONS_OF_CHATS, {"chat_ids": chat_ids})
            known = {info.key: info for info in map(session_info, rows)}
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
        """See `bot.store_ports.HistoryStore.append_inbound` and `storage.inbound_batch`."""
        return await self._batches.append(items)

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
            srow = await session_row(conn, row.session_id, lock=True)
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
                await run_plan(conn, rederive_subtree(srow, record_id))
            result = (
                await conn.execute(select(*RECORD_COLUMNS).where(MESSAGES.c.id == record_id))
            ).one()
            if result.alias_last is None:
                await run_plan(conn, repair_path(srow.alias_root_base, record_id))
                result = (
                    await conn.execute(select(*RECORD_COLUMNS).where(MESSAGES.c.id == record_id))
                ).one()
        return stored_record(result)

    async def _repair_path(self, session_id: int, leaf_id: int) -> None:
        await self._write_plan(partial(_repair_plan, self._parts, session_id, leaf_id))

    # ------------------------------------------------------------ platform messages

    async def record_platform_messages(self, messages: Sequence[PlatformMessage]) -> None:
        if not messages:
            return
        async with self._write() as conn:
            await self._write_platform_messages(conn, messages, default_record_id=None)

    async def find_platform_message(self, chat_id: int, message_id: int) -> PlatformMessage | None:
        params = {"chat_id": chat_id, "message_id": message_id}
        rows = await self._one_read(PLATFORM_MESSAGE_BY_KEY, params)
        return platform_message_from_row(rows[0]) if rows else None

    async def _write_platform_messages(
        self,
        conn: AsyncConnection,
        messages: Sequence[PlatformMessage],
        *,
        default_record_id: int | None,
    ) -> None:
        rows = [platform_message_row(m, default_record_id=default_record_id) for m in messages]
        await run_plan(conn, self._parts.store_platform_messages(rows))

    async def erase_message(
        self, chat_id: int, message_id: int, *, keep_media: bool = False
    ) -> bool:
        """See `bot.store_ports.PlatformMessages.erase_message` and `storage.erase`."""
        async with self._write() as conn:
            return await erase_rows(conn, chat_id, message_id, keep_media=keep_media)

    async def search_messages(
        self, chat_id: int, thread_id: int, query: str, *, limit: int
    ) -> tuple[PlatformMessage, ...]:
        """See `bot.ports.HistorySearch` and `storage.search`."""
        async with self._read() as conn:
            rows = await search_platform_message_rows(conn, chat_id, thread_id, query, limit=limit)
        return tuple(map(platform_message_from_row, rows))

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

    # ------------------------------------------------------------ chat events

    async def set_chat_closed(self, chat_id: int, closed: bool) -> int:
        now = self._now()
        where = SESSIONS.c.chat_id == chat_id
        where = where & (
            SESSIONS.c.closed_at.is_(None) if closed else SESSIONS.c.closed_at.is_not(None)
        )
        async with self._write() as conn:
            result = await conn.execute(
                update(SESSIONS).where(where).values(closed_at=now if closed else None)
            )
        return int(result.rowcount or 0)

    async def is_chat_closed(self, chat_id: int) -> bool:
        return bool(await self._one_read(CLOSED_SESSION_OF_CHAT, {"chat_id": chat_id}))

    async def record_reactions(self, reactions: Sequence[StoredReaction]) -> None:
        if not reactions:
            return
        latest = latest_reactions(reactions)
        async with self._write() as conn:
            # one row per member, message and emoji: a toggle replaces the member's row (a
            # thousand 👍 toggles are one row, not five hundred)
            await conn.execute(_DROP_REACTION, [_reaction_key(r) for r in latest])
            await conn.execute(REACTIONS.insert(), [reaction_row(r) for r in latest])

    async def reactions_since(
        self, chat_id: int, thread_id: int, since: datetime | None, *, limit: int
    ) -> tuple[StoredReaction, ...]:
        params = {
            "chat_id": chat_id,
            "thread_id": thread_id,
            "since": EPOCH if since is None else utc(since),
            "limit": limit,
        }
        async with self._read(one_statement=True) as conn:
            rows = (await conn.execute(REACTIONS_SINCE, params)).all()
        return tuple(stored_reaction(row) for row in reversed(rows))

    async def reactions_between(self, start: datetime, end: datetime) -> tuple[StoredReaction, ...]:
        query = (
            select(REACTIONS)
            .where(REACTIONS.c.created_at >= utc(start), REACTIONS.c.created_at < utc(end))
            .order_by(REACTIONS.c.created_at, REACTIONS.c.id)
        )
        async with self._read(one_statement=True) as conn:
            rows = (await conn.execute(query)).all()
        return latest_reactions(stored_reaction(row) for row in rows)

    # ------------------------------------------------------------ retention

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> PruneResult:
        """Apply the policy of `storage.retention`; platform messages, reactions and update
        ids default to the same cutoff."""
        cutoff = utc(older_than)
        events_cutoff = cutoff if events_older_than is None else utc(events_older_than)
        async with self._write() as conn:
            return await prune_rows(conn, cutoff, events_cutoff)


def _repair_plan(parts: SqlParts, session_id: int, leaf_id: int) -> Plan[None]:
    """Lock the session and repair the alias cache of the path ending at `leaf_id`."""
    yield from parts.lock_sessions((session_id,))
    srow = first_row((yield Rows(SESSION_BY_ID, {"session_id": session_id})))
    if srow is None:
        raise SessionNotFound(f"no session {session_id}")
    yield from repair_path(srow.alias_root_base, leaf_id)


def _satisfies_the_ports(store: SqlStore) -> ConversationStore:
    """Checked by mypy: the store implements `bot.store_ports.ConversationStore`."""
    return store
