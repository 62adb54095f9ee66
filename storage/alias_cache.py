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
first id (`set_message_ids`) re-derives it and its descendants, and rows whose cache is
missing are repaired (`storage.alias_repair`, both). Callers hold the session row's write
lock, so derivations never race.

The pure functions work on plain values and are shared with `testkit.memory_store`; the
plans (`storage.plan`) keep the SQL columns up to date.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select

from bot.context.alias_table import AliasCounter
from storage.codec import alias_parts
from storage.plan import Plan, Rows, first_row
from storage.queries import EARLIEST_WITH_FIRST
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
