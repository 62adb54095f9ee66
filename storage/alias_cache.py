"""The alias cache: each record's `m<n>` ordinal, stored beside it so reads never count.

Aliases (docs/architecture.md, Aliases) are ordinals over the active path. A record's path
from the root never changes (records are appended, never moved), so its ordinal depends
only on its ancestors, never on which leaf is active or where the window starts. That is
why it can be cached on the record: `alias_seq` (its ordinal, NULL without a confirmed id) and
`alias_last` (the highest ordinal on root → record), written when the record is appended:

- a record without a confirmed id: no ordinal, `alias_last` = the parent's;
- a record whose first id already appears on its path: the earlier ordinal (a physical
  message seen again keeps its first alias);
- otherwise the parent's `alias_last + 1`.

By induction over the path this is exactly one `AliasCounter` pass over root → record
(`derive_path`, the definition; `derive`, one step of it). Switching branches or moving the
window costs nothing; `next_alias_seq` is the leaf's `alias_last + 1`. Changing a record's
first id (`set_message_ids`) re-derives it and its descendants (`rederive_subtree`). Rows
whose cache is missing (`alias_last IS NULL`: bulk imports, rows of an older version) are
repaired by one pass over the path that reads only id, parent_id and the small
`message_ids` column (`repair_path`). Callers hold the session row's write lock, so
derivations never race.

The pure functions work on plain values and are shared with `testkit.memory_store`; the
plans (`storage.plan`) keep the SQL columns up to date.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select, update

from bot.context.alias_table import AliasCounter
from storage.codec import alias_parts
from storage.payload import decode_message_ids
from storage.plan import Plan, Rows, Run, first_row
from storage.queries import EARLIEST_WITH_FIRST, walk_params, walk_up
from storage.tables import MESSAGES

# ---------------------------------------------------------------- pure derivation


@dataclass(frozen=True, slots=True)
class Derived:
    """A record's cached columns: `seq` its ordinal (None without a confirmed id), `last`
    the highest ordinal on root → record."""

    seq: int | None
    last: int


def derive(parent_last: int, first: int | None, seq_on_path: int | None) -> Derived:
    """One step: a record's columns from its parent's `last`, its first confirmed platform id
    and the ordinal that id already has on the record's path (None when it has none)."""
    if first is None:
        return Derived(None, parent_last)
    if seq_on_path is not None:
        return Derived(seq_on_path, parent_last)
    return Derived(parent_last + 1, parent_last + 1)


def derive_path(root_base: int, path: Iterable[Sequence[int | None]]) -> list[Derived]:
    """The definition: the columns of every record of a path root → leaf, each record given
    by its message ids, in one pass; ordinals continue after `root_base` (pruned records)."""
    counter = AliasCounter(root_base)
    derived: list[Derived] = []
    for message_ids in path:
        seq = counter.assign(message_ids).seq
        derived.append(Derived(seq, counter.last_seq))
    return derived


def path_to(leaf_id: int | None, parent_of: Callable[[int], int | None]) -> list[int]:
    """Record ids root → `leaf_id` (none for None), following `parent_of`."""
    path: list[int] = []
    current = leaf_id
    while current is not None:
        path.append(current)
        current = parent_of(current)
    path.reverse()
    return path


def aliases_on_path(
    path: Iterable[tuple[int | None, Sequence[int | None]]], wanted: Collection[int]
) -> dict[int, str]:
    """Aliases of the platform ids in `wanted` found on a path of (ordinal, message ids),
    oldest first: a first id is `m<n>`, a later bubble `m<n>.<slot>`; an id found twice keeps
    the alias of its earliest record."""
    found: dict[int, str] = {}
    for seq, message_ids in path:
        for message_id, part in zip(message_ids, alias_parts(seq, message_ids), strict=True):
            if message_id is not None and part is not None and message_id in wanted:
                found.setdefault(message_id, part)
    return found


# ---------------------------------------------------------------- the SQL columns, as plans


def derive_record(
    session_id: int, parent_id: int | None, parent_last: int, first: int | None
) -> Plan[Derived]:
    """A record's alias columns from its parent's (see the module docstring)."""
    earliest = None
    if first is not None and parent_id is not None:
        params = {"session_id": session_id, "first": first, "parent_id": parent_id}
        earliest = first_row((yield Rows(EARLIEST_WITH_FIRST, params)))[0]
    return (yield from derive_with_earliest(parent_id, parent_last, first, earliest=earliest))


def derive_with_earliest(
    parent_id: int | None, parent_last: int, first: int | None, *, earliest: int | None
) -> Plan[Derived]:
    """`derive_record` once `earliest` is known: the oldest record of the session up to the
    parent whose first platform id is `first` (None when there is none)."""
    seq = None
    if first is not None and parent_id is not None and earliest is not None:
        params = {"leaf_id": parent_id, "first": first, "down_to": earliest}
        row = first_row((yield Rows(_SEQ_ON_PATH, params)))
        seq = None if row is None else int(row[0])
    return derive(parent_last, first, seq)


def _seq_on_path() -> Any:
    """The ordinal of `first` on the path ending at `leaf_id`, looking no further back than
    record `down_to` (ids grow from parent to child, so older ancestors cannot match)."""
    walk = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id)
        .where(MESSAGES.c.id == bindparam("leaf_id"))
        .cte("up", recursive=True)
    )
    step = (
        select(MESSAGES.c.id, MESSAGES.c.parent_id)
        .join(walk, MESSAGES.c.id == walk.c.parent_id)
        .where(MESSAGES.c.id >= bindparam("down_to"))
    )
    walk = walk.union_all(step)
    return (
        select(MESSAGES.c.alias_seq)
        .join(walk, MESSAGES.c.id == walk.c.id)
        .where(
            MESSAGES.c.first_message_id == bindparam("first"),
            MESSAGES.c.alias_seq.is_not(None),
        )
        .limit(1)
    )


_SEQ_ON_PATH = _seq_on_path()
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
