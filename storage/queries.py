"""The SQL of `SqlStore` that is built once: column sets, hot statements and path walks.

Hot statements are built at import, with bound parameters: building a construct and its
cache key costs more than running the compiled SQL does. Parameter names differ from
column names where SQLAlchemy reserves those (INSERT and UPDATE).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Integer,
    Select,
    and_,
    bindparam,
    cast,
    func,
    insert,
    literal_column,
    null,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.ids import SessionKey
from bot.errors import SessionNotFound
from storage.codec import REACTION_PREFIX, SESSION_PREFIX
from storage.tables import MESSAGES, PLATFORM_MESSAGES, REACTIONS, SESSIONS

RECORD_COLUMNS = (
    MESSAGES.c.id,
    MESSAGES.c.session_id,
    MESSAGES.c.parent_id,
    MESSAGES.c.created_at,
    MESSAGES.c.payload,
    MESSAGES.c.tokens,
    MESSAGES.c.alias_seq,
    MESSAGES.c.alias_last,
)
ALIAS_COLUMNS = (
    MESSAGES.c.id,
    MESSAGES.c.parent_id,
    MESSAGES.c.message_ids,
    MESSAGES.c.alias_seq,
    MESSAGES.c.alias_last,
)


SESSIONS_OF_CHATS = select(SESSIONS).where(
    SESSIONS.c.chat_id.in_(bindparam("chat_ids", expanding=True))
)
SESSION_BY_KEY = select(SESSIONS).where(
    SESSIONS.c.platform == bindparam("platform"),
    SESSIONS.c.chat_id == bindparam("chat_id"),
    SESSIONS.c.thread_id == bindparam("thread_id"),
)
SESSION_BY_ID = select(SESSIONS).where(SESSIONS.c.id == bindparam("session_id"))
SESSION_BY_ID_LOCKED = SESSION_BY_ID.with_for_update()
RECORD_IN_SESSION = select(MESSAGES.c.id, MESSAGES.c.alias_last).where(
    MESSAGES.c.id == bindparam("record_id"), MESSAGES.c.session_id == bindparam("session_id")
)
REACTIONS_SINCE = (
    select(REACTIONS)
    .where(
        REACTIONS.c.chat_id == bindparam("chat_id"),
        REACTIONS.c.thread_id == bindparam("thread_id"),
        REACTIONS.c.created_at > bindparam("since"),
    )
    .order_by(REACTIONS.c.created_at.desc(), REACTIONS.c.id.desc())
    .limit(bindparam("limit"))
)
"""The newest `limit` reactions of a chat (thread) after `since`, newest first; built once
(every turn asks)."""
CLOSED_SESSION_OF_CHAT = (
    select(SESSIONS.c.id)
    .where(SESSIONS.c.chat_id == bindparam("chat_id"), SESSIONS.c.closed_at.is_not(None))
    .limit(1)
)
"""Any closed session of a chat: the bot was removed from it (every send asks)."""
AWAITING_KINDS = ("user", "tool_results")
"""Leaf kinds a turn answers (a member message) or continues from (tool results)."""
SESSIONS_AWAITING_ANSWER = (
    select(SESSIONS)
    .join(MESSAGES, MESSAGES.c.id == SESSIONS.c.active_leaf_id)
    .where(
        SESSIONS.c.closed_at.is_(None),
        MESSAGES.c.kind.in_(AWAITING_KINDS),
        MESSAGES.c.created_at >= bindparam("since"),
    )
    .order_by(SESSIONS.c.id)
)
"""Open sessions whose active leaf awaits an answer since `since` (the orphaned-turn scan,
every few seconds on each worker: one join on the leaf's primary key)."""
EARLIEST_WITH_FIRST = select(func.min(MESSAGES.c.id)).where(
    MESSAGES.c.session_id == bindparam("session_id"),
    MESSAGES.c.first_message_id == bindparam("first"),
    MESSAGES.c.id <= bindparam("parent_id"),
)


def _aliases_wanted() -> Select[Any]:
    """What `find_aliases` reads, in one statement: a row for session `session_id` with its
    active leaf as `leaf`, and joined to it, the `ALIAS_COLUMNS` of each record on the path
    ending at that leaf that holds one of the platform ids `wanted`, oldest first. No row:
    no such session; one row of NULLs besides `leaf`: no holder on the path.

    The holders, on any branch: records of the session holding a wanted id as their first id
    (indexed), or as a later bubble linked by its platform message (indexed on chat id +
    message id). The walk goes up from the leaf no further than the oldest holder (ids grow
    from parent to child) and carries ids only."""
    session: BindParameter[int] = bindparam("session_id", type_=BigInteger)
    chat = select(SESSIONS.c.chat_id).where(SESSIONS.c.id == session).scalar_subquery()
    leaf = select(SESSIONS.c.active_leaf_id).where(SESSIONS.c.id == session).scalar_subquery()
    by_first = select(MESSAGES.c.id.label("id")).where(
        MESSAGES.c.session_id == session,
        MESSAGES.c.first_message_id.in_(bindparam("wanted", expanding=True)),
    )
    by_event = (
        select(MESSAGES.c.id.label("id"))
        .select_from(
            PLATFORM_MESSAGES.join(MESSAGES, MESSAGES.c.id == PLATFORM_MESSAGES.c.record_id)
        )
        .where(
            PLATFORM_MESSAGES.c.chat_id == chat,
            PLATFORM_MESSAGES.c.message_id.in_(bindparam("wanted_bubbles", expanding=True)),
            MESSAGES.c.session_id == session,
        )
    )
    holders = by_first.union(by_event).cte("holders")
    floor = select(func.min(holders.c.id)).scalar_subquery()
    up = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id)
        .where(MESSAGES.c.id == leaf)
        .cte("up", recursive=True)
    )
    step = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id)
        .join(up, MESSAGES.c.id == up.c.parent_id)
        .where(MESSAGES.c.id >= floor)
    )
    up = up.union_all(step)
    held = (
        select(*ALIAS_COLUMNS)
        .where(MESSAGES.c.id.in_(select(holders.c.id)), MESSAGES.c.id.in_(select(up.c.id)))
        .subquery("held")
    )
    return (
        select(SESSIONS.c.active_leaf_id.label("leaf"), *held.c)
        .select_from(SESSIONS.outerjoin(held, true()))
        .where(SESSIONS.c.id == session)
        .order_by(held.c.id)
    )


ALIASES_WANTED = _aliases_wanted()
PLATFORM_MESSAGE_BY_KEY = select(PLATFORM_MESSAGES).where(
    PLATFORM_MESSAGES.c.chat_id == bindparam("chat_id"),
    PLATFORM_MESSAGES.c.message_id == bindparam("message_id"),
)
INSERT_RECORD = insert(MESSAGES).returning(MESSAGES.c.id)
MOVE_LEAF = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("session_id"))
    .values(active_leaf_id=bindparam("leaf_id"), updated_at=bindparam("now"))
)


def _append_head() -> Select[Any]:
    """What `append` needs before its first insert, in one round trip: the session row; the
    parent (`parent_id`, or the active leaf when that is NULL) as `parent_row` and
    `parent_last`; and as `earliest` the oldest record of the session up to the parent
    whose first platform id is `first` (see `storage.alias_cache`).

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


APPEND_HEAD = _append_head()


def upserting_platform_messages(stmt: Any) -> Any:
    """`stmt`, a database's INSERT into `platform_events` (which knows ON CONFLICT), made to
    update the known rows instead (keeping their record and edit time when the new row has
    none)."""
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
            "record_id": func.coalesce(stmt.excluded.record_id, PLATFORM_MESSAGES.c.record_id),
            "edited_at": func.coalesce(stmt.excluded.edited_at, PLATFORM_MESSAGES.c.edited_at),
        },
    )


def key_params(key: SessionKey) -> dict[str, Any]:
    return {"platform": key.platform, "chat_id": key.chat_id, "thread_id": key.thread_id}


async def session_row(conn: AsyncConnection, session_id: int, *, lock: bool = False) -> Any:
    query = SESSION_BY_ID_LOCKED if lock else SESSION_BY_ID
    row = (await conn.execute(query, {"session_id": session_id})).first()
    if row is None:
        raise SessionNotFound(f"no session {session_id}")
    return row


async def require_record(conn: AsyncConnection, session_id: int, record_id: int) -> Any:
    params = {"record_id": record_id, "session_id": session_id}
    row = (await conn.execute(RECORD_IN_SESSION, params)).first()
    if row is None:
        raise SessionNotFound(f"no record {record_id} in session {session_id}")
    return row


def walk_params(
    leaf_id: int, *, stop_at: int | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The parameters of `walk_up(..., stop=stop_at is not None, limit=limit is not None)`."""
    params: dict[str, Any] = {"leaf_id": leaf_id}
    if stop_at is not None:
        params["stop_at"] = stop_at
    if limit is not None:
        params["limit"] = limit
    return params


@functools.cache
def walk_up(
    columns: Literal["records", "aliases"], *, stop: bool = False, limit: bool = False
) -> Select[Any]:
    """Rows of the path ending at record `leaf_id`, oldest first: back to `stop_at`
    (included) when `stop`, else the root; at most `limit` rows when `limit` (parameters
    from `walk_params`). A recursive CTE: one primary-key lookup per row."""
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
    wanted = RECORD_COLUMNS if columns == "records" else ALIAS_COLUMNS
    return select(*wanted).join(walk, MESSAGES.c.id == walk.c.id).order_by(walk.c.depth.desc())


def not_by_session(session_id: Any) -> Any:
    """`session_id` matches, without SQLite walking `ix_agent_messages_session_first_id` for
    it: with no statistics, SQLite takes that index for `session_id = ?` over
    `ix_agent_messages_parent` for `parent_id = ?` and reads every record of the session
    (EXPLAIN QUERY PLAN: `SEARCH ... (session_id=?)`), where the parent's few children were
    all it needed. `+ 0` keeps the column out of any index; PostgreSQL plans by its
    statistics either way."""
    return MESSAGES.c.session_id + 0 == session_id


SESSION_PART = 0
RECORD_PART = 1
SUMMARY_PART = 2
REACTION_PART = 3
_SESSION_COLUMNS = tuple(c for c in SESSIONS.c if c.name not in ("created_at", "updated_at"))
"""What `storage.codec.session_info` reads (each column is a conversion on every row)."""


def _typed_null(column: Any, name: str) -> Any:
    """A NULL of `column`'s type: the UNION's result keeps its conversions, and PostgreSQL
    matches the UNION's column types (an untyped NULL would be text)."""
    return cast(null(), column.type).label(name)


def _wide(
    part: int,
    *,
    session: Any = None,
    record: Any = None,
    depth: Any = None,
    reaction: Any = None,
) -> list[Any]:
    """The columns of one part of `window_load`: `part`, the session's (`s_` names), the
    record's (`RECORD_COLUMNS` names) and `depth`, the reaction's (`r_` names); NULL where
    the part has none."""
    columns: list[Any] = [literal_column(str(part), Integer).label("part")]
    for column in _SESSION_COLUMNS:
        name = SESSION_PREFIX + column.name
        columns.append(
            _typed_null(column, name) if session is None else session.c[column.name].label(name)
        )
    for column in RECORD_COLUMNS:
        columns.append(
            _typed_null(column, column.name) if record is None else record.c[column.name]
        )
    columns.append(
        literal_column("0", Integer).label("depth") if depth is None else depth.label("depth")
    )
    for column in REACTIONS.c:
        name = REACTION_PREFIX + column.name
        columns.append(
            _typed_null(column, name) if reaction is None else reaction.c[column.name].label(name)
        )
    return columns


@functools.cache
def window_load(*, summaries: bool = False, reactions: bool = False) -> Select[Any]:
    """A turn's reads of session `session_id` in one statement (one round trip, no
    transaction needed: one statement reads one snapshot), as rows of `_wide` tagged by
    `part`:

    - `SESSION_PART`: the session row;
    - `RECORD_PART`: the active path from the leaf back to the window start (included), at
      most `limit` rows, `depth` 1 at the leaf (the walk of `walk_up`);
    - with `summaries`, `SUMMARY_PART`: summary records hanging under the parent of the
      oldest record walked (what precedes the window), oldest first;
    - with `reactions`, `REACTION_PART`: the newest `reactions_limit` reactions of the
      session's chat and thread made after the oldest record walked was created."""
    state = (
        select(
            SESSIONS.c.active_leaf_id,
            SESSIONS.c.window_start_id,
            SESSIONS.c.chat_id,
            SESSIONS.c.thread_id,
        )
        .where(SESSIONS.c.id == bindparam("session_id"))
        .cte("state")
    )
    walk = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id, literal_column("1", Integer).label("depth"))
        .where(MESSAGES.c.id == select(state.c.active_leaf_id).scalar_subquery())
        .cte("walk", recursive=True)
    )
    step = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id, (walk.c.depth + 1).label("depth"))
        .join(walk, MESSAGES.c.id == walk.c.parent_id)
        .where(
            walk.c.id.is_distinct_from(select(state.c.window_start_id).scalar_subquery()),
            walk.c.depth < bindparam("limit"),
        )
    )
    walk = walk.union_all(step)
    session_part = select(*_wide(SESSION_PART, session=SESSIONS)).where(
        SESSIONS.c.id == bindparam("session_id")
    )
    record_part = select(*_wide(RECORD_PART, record=MESSAGES, depth=walk.c.depth)).select_from(
        MESSAGES.join(walk, MESSAGES.c.id == walk.c.id)
    )
    parts: list[Select[Any]] = [session_part, record_part]
    oldest = select(walk.c.id).order_by(walk.c.depth.desc()).limit(1).scalar_subquery()
    if summaries:
        before = select(MESSAGES.c.parent_id).where(MESSAGES.c.id == oldest).scalar_subquery()
        parts.append(
            select(*_wide(SUMMARY_PART, record=MESSAGES)).where(
                not_by_session(bindparam("session_id")),
                MESSAGES.c.kind == "summary",
                MESSAGES.c.parent_id == before,
            )
        )
    if reactions:
        since = select(MESSAGES.c.created_at).where(MESSAGES.c.id == oldest).scalar_subquery()
        newest = (
            select(REACTIONS)
            .where(
                REACTIONS.c.chat_id == select(state.c.chat_id).scalar_subquery(),
                REACTIONS.c.thread_id == select(state.c.thread_id).scalar_subquery(),
                REACTIONS.c.created_at > since,
            )
            .order_by(REACTIONS.c.created_at.desc(), REACTIONS.c.id.desc())
            .limit(bindparam("reactions_limit"))
            .subquery("newest")
        )
        parts.append(select(*_wide(REACTION_PART, reaction=newest)))
    everything = union_all(*parts).subquery("parts")
    return select(everything).order_by(
        everything.c.part,
        everything.c.depth.desc(),
        everything.c.id,
        everything.c.r_created_at,
        everything.c.r_id,
    )
