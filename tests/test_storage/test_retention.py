"""The prune plan: only an old prefix of the active path before the window start goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.retention import Node, plan_prune

NOW = datetime(2026, 3, 1, tzinfo=UTC)
OLD = NOW - timedelta(days=90)


def chain(count: int, *, at: datetime = OLD, start: int = 1) -> list[Node]:
    return [Node(i, i - 1 if i > start else None, at) for i in range(start, start + count)]


def test_deletes_the_old_prefix_and_reroots() -> None:
    plan = plan_prune(chain(6), active_leaf_id=6, window_start_id=4, older_than=NOW)
    assert (plan.delete, plan.new_root, plan.last_removed) == (frozenset({1, 2, 3}), 4, 3)


def test_stops_at_a_record_that_is_too_new() -> None:
    nodes = [*chain(3), Node(4, 3, NOW), Node(5, 4, OLD), Node(6, 5, OLD)]
    plan = plan_prune(nodes, active_leaf_id=6, window_start_id=6, older_than=NOW)
    assert plan.delete == frozenset({1, 2, 3})


def test_takes_old_side_branches_along_and_keeps_new_ones() -> None:
    nodes = [*chain(5), Node(6, 1, OLD), Node(7, 6, OLD), Node(8, 3, NOW)]
    plan = plan_prune(nodes, active_leaf_id=5, window_start_id=5, older_than=NOW)
    assert plan.delete == frozenset({1, 2, 6, 7})
    assert plan.new_root == 3


def test_nothing_without_a_window_start_on_the_active_path() -> None:
    nodes = [*chain(4), Node(5, 2, OLD)]
    assert not plan_prune(nodes, active_leaf_id=4, window_start_id=None, older_than=NOW).delete
    assert not plan_prune(nodes, active_leaf_id=4, window_start_id=5, older_than=NOW).delete
    assert not plan_prune(nodes, active_leaf_id=4, window_start_id=1, older_than=NOW).delete


def test_keeps_the_current_summarys_anchor() -> None:
    """Issue 25 item 8: the summary of what precedes the window hangs under the record right
    before the window start; that record and its summary stay, older summaries may go."""
    nodes = [*chain(6), Node(7, 3, OLD, True), Node(8, 1, OLD, True)]
    plan = plan_prune(nodes, active_leaf_id=6, window_start_id=4, older_than=NOW)
    assert (plan.delete, plan.new_root, plan.last_removed) == (frozenset({1, 2, 8}), 3, 2)
