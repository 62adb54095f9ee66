"""`SqlHistory`: a session's record tree on SQL, read and written (`bot.store_ports.HistoryStore`).

Loading follows the window, not the history. `load_history` walks the active path from
the leaf back to the window start (at most `max_records` rows) with a recursive CTE on
`parent_id`, one primary-key lookup per record, so its cost does not grow with the session.

Aliases (docs/architecture.md, Aliases) come from the alias cache of each record
(`storage.alias_cache`), kept up to date by the writers here, which lock the session row
(`SqlParts.lock_sessions`), so derivations never race. Records are written by one
algorithm (`storage.record_write`) whichever executor runs it (`Database.write_plan`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from typing import Any

from sqlalchemy import select, update

from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import StoredRecord
from bot.errors import SessionNotFound, StorageError
from bot.ports import InboundAppend, LoadedHistory, LoadedTurn, NewRecord, StoredReaction
from storage.alias_cache import aliases_on_path
from storage.alias_repair import locked_repair, message_ids_of, rederive_subtree, repair_path
from storage.codec import (
    REACTION_PREFIX,
    SESSION_PREFIX,
    DecodedRecords,
    PrefixedRow,
    session_info,
    stored_record,
)
from storage.executor import Database
from storage.inbound_batch import InboundBatchWriter
from storage.payload import encode_message_ids, first_message_id, with_message_ids
from storage.plan_run import run_plan
from storage.queries import (
    ALIASES_WANTED,
    REACTION_PART,
    RECORD_COLUMNS,
    RECORD_PART,
    SESSION_PART,
    SUMMARY_PART,
    not_by_session,
    require_record,
    session_row,
    walk_params,
    walk_up,
    window_load,
)
from storage.reaction_codec import stored_reaction
from storage.record_write import Append, append_plan
from storage.tables import MESSAGES, SESSIONS


class SqlHistory:
    """`bot.store_ports.HistoryStore` on a `storage.executor.Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._decoded = DecodedRecords()
        self._batches = InboundBatchWriter(db.write_plan, db.parts, db.now)

    async def set_window_start(self, session_id: int, record_id: int | None) -> None:
        async with self._db.write() as conn:
            await session_row(conn, session_id, lock=True)
            if record_id is not None:
                await require_record(conn, session_id, record_id)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(window_start_id=record_id, updated_at=self._db.now())
            )

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
            rows = await self._db.one_read(query, params)
            if not rows or rows[0].part != SESSION_PART:
                raise SessionNotFound(f"no session {session_id}")
            srow = PrefixedRow(rows[0], SESSION_PREFIX)
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
                stored_reaction(PrefixedRow(row, REACTION_PREFIX))
                for row in rows
                if row.part == REACTION_PART
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
            async with self._db.read(one_statement=True) as conn:
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
            async with self._db.read() as conn:
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
        async with self._db.read() as conn:
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
            now=self._db.now(),
        )
        return tuple(await self._db.write_plan(partial(append_plan, self._db.parts, append)))

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
        async with self._db.write() as conn:
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
        await self._db.write_plan(partial(locked_repair, self._db.parts, session_id, leaf_id))
