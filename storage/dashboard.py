"""Read-only queries for the operator dashboard: every chat with its stored window.

One statement answers the whole chat list: a recursive walk from each session's active leaf
up to its window start (at most `max_records` rows per session, as `load_history` would
load), summing the records' stored token estimates, so the cost follows the windows, never
the history. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.domain.ids import Scene, SessionKey
from bot.errors import StorageUnavailable
from storage.codec import utc
from storage.engine import ONE_STATEMENT


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatWindow:
    """A session as the chat list shows it."""

    session_id: int
    key: SessionKey
    scene: Scene
    title: str | None
    last_activity: datetime | None
    """When the newest record of the active path was stored."""
    window_records: int
    window_messages: int
    """Window records that are not tool results."""
    window_tokens: int
    has_summary: bool
    window_start_id: int | None


_CHAT_WINDOWS = text(
    """
    WITH RECURSIVE walk(session_id, id, parent_id, tokens, kind, depth, stop_id) AS (
        SELECT s.id, m.id, m.parent_id, m.tokens, m.kind, 1, s.window_start_id
        FROM chat_sessions AS s JOIN agent_messages AS m ON m.id = s.active_leaf_id
        WHERE s.id IN :ids
        UNION ALL
        SELECT w.session_id, m.id, m.parent_id, m.tokens, m.kind, w.depth + 1, w.stop_id
        FROM walk AS w JOIN agent_messages AS m ON m.id = w.parent_id
        WHERE (w.stop_id IS NULL OR w.id <> w.stop_id) AND w.depth < :limit
    )
    SELECT session_id,
           COUNT(*) AS records,
           SUM(CASE WHEN kind <> 'tool_results' THEN 1 ELSE 0 END) AS messages,
           SUM(tokens) AS tokens,
           SUM(CASE WHEN kind = 'summary' THEN 1 ELSE 0 END) AS summaries
    FROM walk GROUP BY session_id
    """
).bindparams(bindparam("ids", expanding=True))

_SESSIONS = text(
    """
    SELECT s.id, s.platform, s.chat_id, s.thread_id, s.scene, s.title, s.window_start_id,
           m.created_at AS last_activity,
           EXISTS (
               SELECT 1 FROM agent_messages AS w JOIN agent_messages AS sm
                 ON sm.parent_id = w.parent_id AND sm.session_id = w.session_id
               WHERE w.id = s.window_start_id AND sm.kind = 'summary'
           ) AS carries_summary
    FROM chat_sessions AS s LEFT JOIN agent_messages AS m ON m.id = s.active_leaf_id
    ORDER BY (m.created_at IS NULL), m.created_at DESC, s.id
    LIMIT :limit OFFSET :offset
    """
)
_COUNT = text("SELECT COUNT(*) FROM chat_sessions")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatPage:
    chats: tuple[ChatWindow, ...]
    total: int
    """Sessions stored in all."""


async def chat_windows(
    engine: AsyncEngine, *, max_records: int, limit: int = 100, offset: int = 0
) -> ChatPage:
    """Sessions with their stored windows, most recently active first (`limit` of them from
    `offset`): the cost follows the page, not the number of chats."""
    try:
        async with engine.connect() as conn:
            total = int((await conn.execute(_COUNT)).scalar_one())
            sessions = (
                await conn.execute(_SESSIONS, {"limit": max(1, limit), "offset": max(0, offset)})
            ).all()
            windows = {}
            if sessions:
                params = {"limit": max(1, max_records), "ids": [row.id for row in sessions]}
                windows = {row.session_id: row for row in await conn.execute(_CHAT_WINDOWS, params)}
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"could not read the chat list: {type(exc).__name__}") from exc
    chats = []
    for row in sessions:
        window = windows.get(row.id)
        chats.append(
            ChatWindow(
                session_id=row.id,
                key=SessionKey(platform=row.platform, chat_id=row.chat_id, thread_id=row.thread_id),
                scene=row.scene,
                title=row.title,
                last_activity=None if row.last_activity is None else _aware(row.last_activity),
                window_records=0 if window is None else int(window.records),
                window_messages=0 if window is None else int(window.messages or 0),
                window_tokens=0 if window is None else int(window.tokens or 0),
                # the next request carries a summary hanging under the record before the
                # window start (as `summary_before` finds it); an older one inside the
                # window is no longer sent
                has_summary=bool(row.carries_summary),
                window_start_id=row.window_start_id,
            )
        )
    return ChatPage(chats=tuple(chats), total=total)


async def store_answers(engine: AsyncEngine) -> bool:
    """True when the database answers a trivial query (the health check)."""
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(**ONE_STATEMENT)
            await conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError):
        return False
    return True


async def has_bot_tables(engine: AsyncEngine) -> bool:
    """True when the database has the bot's tables (it was migrated at least once)."""
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(**ONE_STATEMENT)
            found = await conn.execute(
                text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chat_sessions'")
            )
            return found.first() is not None
    except (SQLAlchemyError, OSError):
        return False


async def inbound_message_count(engine: AsyncEngine) -> int:
    """Platform messages from people (not the bot) stored so far."""
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(**ONE_STATEMENT)
            value = (
                await conn.execute(text("SELECT COUNT(*) FROM platform_events WHERE NOT is_bot"))
            ).scalar_one()
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"could not count messages: {type(exc).__name__}") from exc
    return int(value)


def _aware(value: datetime | str) -> datetime:
    # SQLite hands raw SQL datetimes back as text
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return utc(value)


_PER_SCENE = text("SELECT scene, COUNT(*) AS sessions FROM chat_sessions GROUP BY scene")


async def sessions_per_scene(engine: AsyncEngine) -> dict[str, int]:
    """How many chat sessions each scene holds (each has its own cached prefix)."""
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(_PER_SCENE)).all()
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"could not count the sessions: {type(exc).__name__}") from exc
    return {str(row.scene): int(row.sessions) for row in rows}
