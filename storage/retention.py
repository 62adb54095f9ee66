"""Retention: which records a prune may delete (pure), and what a prune removed.

Policy, the same for every backend. Platform messages and processed update ids older than
their cutoff are deleted. Records are deleted only from the **start of a session's active
path**, strictly before its window start (so never the window, never the active tail, never
a session without a window start), and only while every record removed is older than the
cutoff, including the abandoned branches hanging off that prefix: the prefix stops at the
first record that is too new or whose side branches hold a record that is too new, so no
kept record ever loses its parent. The first kept record becomes the new root. The current
summary's anchor (the record right before the window start, when a summary hangs under it)
is never removed, so what the window left stays summarised. Aliases
never renumber: the ordinals used by the removed prefix are remembered on the session.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from storage.alias_cache import path_to


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneResult:
    """How many rows a prune deleted."""

    records: int = 0
    platform_messages: int = 0
    updates: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    """The tree position and age of one record, all a prune plan needs."""

    id: int
    parent_id: int | None
    created_at: datetime
    summary: bool = False
    """A compaction summary (kind `summary`, hanging off the path under its anchor)."""


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """Records to delete; `new_root` loses its parent; `last_removed` was its parent."""

    delete: frozenset[int]
    new_root: int | None = None
    last_removed: int | None = None


def plan_prune(
    nodes: Iterable[Node],
    *,
    active_leaf_id: int | None,
    window_start_id: int | None,
    older_than: datetime,
) -> PrunePlan:
    """What may go from one session's tree under the policy of this module."""
    by_id = {node.id: node for node in nodes}
    if active_leaf_id not in by_id or window_start_id not in by_id:
        return PrunePlan(frozenset())
    path = path_to(active_leaf_id, lambda record_id: by_id[record_id].parent_id)
    if window_start_id not in path:
        return PrunePlan(frozenset())
    children: dict[int, list[int]] = defaultdict(list)
    for node in by_id.values():
        if node.parent_id is not None:
            children[node.parent_id].append(node.id)

    end = path.index(window_start_id)
    if end > 0 and any(by_id[child].summary for child in children[path[end - 1]]):
        end -= 1  # the current summary's anchor stays, and the summary with it
    delete: set[int] = set()
    cut = 0
    for index, record_id in enumerate(path[:end]):
        if by_id[record_id].created_at >= older_than:
            break
        side = _side_branches(children, record_id, keep=path[index + 1])
        if any(by_id[other].created_at >= older_than for other in side):
            break
        delete.add(record_id)
        delete.update(side)
        cut = index + 1
    if cut == 0:
        return PrunePlan(frozenset())
    return PrunePlan(frozenset(delete), new_root=path[cut], last_removed=path[cut - 1])


def _side_branches(children: dict[int, list[int]], record_id: int, *, keep: int) -> list[int]:
    """Every descendant of `record_id` outside the child `keep` and its subtree."""
    found: list[int] = []
    stack = [child for child in children[record_id] if child != keep]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children[current])
    return found
