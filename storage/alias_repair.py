"""Alias cache repairs: a path whose ordinals are missing, a subtree whose first id changed.

The cache itself and its definition live in `storage.alias_cache`. Rows whose cache is
missing (`alias_last IS NULL`: bulk imports, rows of an older version) are repaired by one
pass over the path that reads only id, parent_id and the small `message_ids` column
(`repair_path`; `locked_repair` locks the session row first); changing a record's first id
(`set_message_ids`) re-derives it and its descendants (`rederive_subtree`). Neither runs
on an ordinary append. Callers hold the session row's write lock, so repairs never race.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select, update

from bot.errors import SessionNotFound
from storage.alias_cache import derive_path, derive_record
from storage.payload import decode_message_ids
from storage.plan import Plan, Rows, Run, SqlParts, first_row
from storage.queries import SESSION_BY_ID, walk_params, walk_up
from storage.tables import MESSAGES

_ALIAS_LAST = select(MESSAGES.c.alias_last).where(MESSAGES.c.id == bindparam("record_id"))
_NODE = select(MESSAGES.c.parent_id, MESSAGES.c.first_message_id).where(
    MESSAGES.c.id == bindparam("record_id")
)
_SET_ALIASES = (
    update(MESSAGES)
    .where(MESSAGES.c.id == bindparam("rid"))
    .values(alias_seq=bindparam("seq"), alias_last=bindparam("last"))
)


def _subtree() -> Any:
    down = select(MESSAGES.c.id).where(MESSAGES.c.id == bindparam("record_id")).cte("down", True)
    down = down.union_all(select(MESSAGES.c.id).join(down, MESSAGES.c.parent_id == down.c.id))
    return (
        select(MESSAGES.c.id, MESSAGES.c.parent_id, MESSAGES.c.first_message_id)
        .where(MESSAGES.c.id.in_(select(down.c.id)))
        .order_by(MESSAGES.c.id)
    )


_SUBTREE = _subtree()


def alias_last_of(record_id: int) -> Plan[int | None]:
    """A record's cached `alias_last` (None: missing, or no such record)."""
    row = first_row((yield Rows(_ALIAS_LAST, {"record_id": record_id})))
    return None if row is None else row[0]


def rederive_subtree(srow: Any, record_id: int) -> Plan[None]:
    """Re-derive a record whose first id changed, then its descendants in id order."""
    (row,) = yield Rows(_NODE, {"record_id": record_id})
    if row.parent_id is None:
        parent_last: int | None = srow.alias_root_base
    else:
        parent_last = yield from alias_last_of(row.parent_id)
    if parent_last is None:
        yield from repair_path(srow.alias_root_base, record_id)
        parent_last = yield from alias_last_of(row.parent_id)
        assert parent_last is not None
    subtree = yield Rows(_SUBTREE, {"record_id": record_id})
    last_of: dict[int | None, int] = {row.parent_id: parent_last}
    for node in subtree:
        derived = yield from derive_record(
            srow.id, node.parent_id, last_of[node.parent_id], node.first_message_id
        )
        last_of[node.id] = derived.last
        yield Run(_SET_ALIASES, ({"rid": node.id, "seq": derived.seq, "last": derived.last},))


def repair_path(root_base: int, leaf_id: int) -> Plan[None]:
    """Recompute the alias columns of the whole path root → `leaf_id` in one pass (ordinals
    after the session's `root_base`)."""
    rows = yield Rows(walk_up("aliases"), walk_params(leaf_id))
    derived = derive_path(root_base, (message_ids_of(row) for row in rows))
    changed = [
        {"rid": row.id, "seq": cache.seq, "last": cache.last}
        for row, cache in zip(rows, derived, strict=True)
        if (cache.seq, cache.last) != (row.alias_seq, row.alias_last)
    ]
    if changed:
        yield Run(_SET_ALIASES, changed)


def message_ids_of(row: Any) -> tuple[int | None, ...]:
    """The `message_ids` column of a row of `ALIAS_COLUMNS`, decoded."""
    return decode_message_ids(row.message_ids) if row.message_ids != "[]" else ()


def locked_repair(parts: SqlParts, session_id: int, leaf_id: int) -> Plan[None]:
    """Lock the session and repair the alias cache of the path ending at `leaf_id`."""
    yield from parts.lock_sessions((session_id,))
    srow = first_row((yield Rows(SESSION_BY_ID, {"session_id": session_id})))
    if srow is None:
        raise SessionNotFound(f"no session {session_id}")
    yield from repair_path(srow.alias_root_base, leaf_id)
