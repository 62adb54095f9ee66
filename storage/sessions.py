"""`SqlSessions`: the store's sessions on SQL (`bot.store_ports.SessionStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from bot.domain.ids import Scene, SessionKey
from bot.ports import (
    SessionInfo,
    SessionRequest,
)
from storage.codec import (
    session_info,
    utc,
)
from storage.executor import Database
from storage.queries import (
    SESSION_BY_KEY,
    SESSIONS_AWAITING_ANSWER,
    SESSIONS_OF_CHATS,
    key_params,
    require_record,
    session_row,
)
from storage.tables import SESSIONS


class SqlSessions:
    """`bot.store_ports.SessionStore` on a `storage.executor.Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def open_session(
        self, key: SessionKey, *, scene: Scene, title: str | None = None
    ) -> SessionInfo:
        # Nearly every call finds the session as it is: answer those with one read and
        # keep the write lock for the first message of a chat and for changes.
        known = await self.find_session(key)
        if known is not None and known.scene == scene and title in (None, known.title):
            return known
        now = self._db.now()
        async with self._db.write() as conn:
            stmt = (
                self._db.parts.insert(SESSIONS)
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
        rows = await self._db.one_read(SESSION_BY_KEY, key_params(key))
        return session_info(rows[0]) if rows else None

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        async with self._db.read(one_statement=True) as conn:
            rows = (await conn.execute(select(SESSIONS).order_by(SESSIONS.c.id))).all()
        return tuple(session_info(row) for row in rows)

    async def sessions_awaiting_answer(self, since: datetime) -> tuple[SessionInfo, ...]:
        async with self._db.read(one_statement=True) as conn:
            rows = (await conn.execute(SESSIONS_AWAITING_ANSWER, {"since": utc(since)})).all()
        return tuple(session_info(row) for row in rows)

    async def set_route(self, session_id: int, route: str | None) -> None:
        async with self._db.write() as conn:
            await session_row(conn, session_id, lock=True)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(route=route, updated_at=self._db.now())
            )

    async def set_active_leaf(self, session_id: int, record_id: int) -> None:
        async with self._db.write() as conn:
            await session_row(conn, session_id, lock=True)
            await require_record(conn, session_id, record_id)
            await conn.execute(
                update(SESSIONS)
                .where(SESSIONS.c.id == session_id)
                .values(active_leaf_id=record_id, updated_at=self._db.now())
            )

    async def open_sessions(self, requests: Sequence[SessionRequest]) -> tuple[SessionInfo, ...]:
        """One read for the known sessions; `open_session` for new or changed ones."""
        chat_ids = sorted({r.key.chat_id for r in requests})
        rows = await self._db.one_read(SESSIONS_OF_CHATS, {"chat_ids": chat_ids})
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
