"""Retention on SQL: deleting what `storage.retention.plan_prune` chose, in one transaction.

Per session, the records older than the cutoff that the plan may drop (never the window
start's anchor nor the current summary), re-rooting the kept tree and keeping the alias
ordinals by raising the session's `alias_root_base`; then platform messages, processed
update ids and reactions older than their cutoff.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.alias_repair import repair_path
from storage.codec import utc
from storage.plan_run import run_plan
from storage.retention import Node, PruneResult, plan_prune
from storage.tables import MESSAGES, PLATFORM_MESSAGES, REACTIONS, SESSIONS, UPDATES

_DELETE_CHUNK = 500


async def prune_rows(
    conn: AsyncConnection, cutoff: datetime, events_cutoff: datetime
) -> PruneResult:
    """Delete records older than `cutoff` (by each session's plan) and platform messages,
    update ids and reactions older than `events_cutoff`."""
    removed = 0
    sessions = (await conn.execute(select(SESSIONS).order_by(SESSIONS.c.id))).all()
    for srow in sessions:
        if srow.window_start_id is None or srow.active_leaf_id is None:
            continue
        removed += await _prune_session(conn, srow, cutoff)
    messages = await conn.execute(
        delete(PLATFORM_MESSAGES).where(PLATFORM_MESSAGES.c.date < events_cutoff)
    )
    updates = await conn.execute(delete(UPDATES).where(UPDATES.c.processed_at < events_cutoff))
    await conn.execute(delete(REACTIONS).where(REACTIONS.c.created_at < events_cutoff))
    return PruneResult(
        records=removed, platform_messages=messages.rowcount, updates=updates.rowcount
    )


async def _prune_session(conn: AsyncConnection, srow: Any, cutoff: datetime) -> int:
    rows = (
        await conn.execute(
            select(
                MESSAGES.c.id, MESSAGES.c.parent_id, MESSAGES.c.created_at, MESSAGES.c.kind
            ).where(MESSAGES.c.session_id == srow.id)
        )
    ).all()
    plan = plan_prune(
        (Node(row.id, row.parent_id, utc(row.created_at), row.kind == "summary") for row in rows),
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
        await run_plan(conn, repair_path(srow.alias_root_base, srow.active_leaf_id))
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
