"""The pure alias derivation of `storage.alias_cache`, on plain (id, parent, message ids) values."""

from __future__ import annotations

import random

from storage.alias_cache import (
    Derived,
    aliases_on_path,
    derive,
    derive_path,
    path_to,
)
from storage.codec import alias_parts

Tree = dict[int, tuple[int | None, tuple[int | None, ...]]]
"""record id -> (parent id, message ids); ids grow from parent to child."""


def random_tree(seed: int, size: int = 60) -> Tree:
    rng = random.Random(seed)
    tree: Tree = {}
    for record_id in range(1, size + 1):
        parent = None if record_id == 1 or rng.random() < 0.05 else rng.randrange(1, record_id)
        slots = rng.choice([0, 1, 1, 1, 2, 3])
        # A small pool of platform ids, so a message shows up again on some paths.
        ids = tuple(None if rng.random() < 0.2 else rng.randrange(1, 40) for _ in range(slots))
        tree[record_id] = (parent, ids)
    return tree


def first_id(message_ids: tuple[int | None, ...]) -> int | None:
    return next((mid for mid in message_ids if mid is not None), None)


class TestDerivePath:
    def test_ordinals_skip_unconfirmed_records_and_repeats(self) -> None:
        derived = derive_path(0, [(10,), (11, None, 13), (None,), (), (10,), (14,)])
        assert derived == [
            Derived(1, 1),
            Derived(2, 2),
            Derived(None, 2),
            Derived(None, 2),
            Derived(1, 2),  # message 10 again keeps its first alias
            Derived(3, 3),
        ]

    def test_ordinals_continue_after_pruned_records(self) -> None:
        assert derive_path(7, [(None,), (5,)]) == [Derived(None, 7), Derived(8, 8)]

    def test_a_later_bubble_id_is_not_a_first_id(self) -> None:
        # 11 is the second bubble of the first record; as a first id it is new.
        assert [d.seq for d in derive_path(0, [(10, 11), (11,)])] == [1, 2]


class TestTheCacheMatchesTheDefinition:
    def test_one_step_per_record_equals_one_pass_over_its_path(self) -> None:
        # What the SQL cache does on append: derive each record from its parent's columns
        # and the ordinal its first id already has on its own path.
        for seed in range(20):
            tree = random_tree(seed)
            parent_of = {rid: parent for rid, (parent, _) in tree.items()}.__getitem__
            cache: dict[int, Derived] = {}
            for record_id, (parent, ids) in sorted(tree.items()):
                first = first_id(ids)
                ancestors = path_to(parent, parent_of)
                earlier = next(
                    (
                        cache[rid].seq
                        for rid in ancestors
                        if first is not None and first_id(tree[rid][1]) == first
                    ),
                    None,
                )
                parent_last = 0 if parent is None else cache[parent].last
                cache[record_id] = derive(parent_last, first, earlier)
            for leaf in tree:
                path = path_to(leaf, parent_of)
                expected = derive_path(0, [tree[rid][1] for rid in path])
                assert [cache[rid] for rid in path] == expected, (seed, leaf)


class TestPathTo:
    def test_root_to_leaf(self) -> None:
        parents = {1: None, 2: 1, 3: 1, 4: 3}
        assert path_to(4, parents.__getitem__) == [1, 3, 4]
        assert path_to(2, parents.__getitem__) == [1, 2]
        assert path_to(None, parents.__getitem__) == []


class TestAliasesOnPath:
    def test_first_ids_later_bubbles_and_unknown_slots(self) -> None:
        path = [(1, (10,)), (2, (11, None, 13)), (None, (None,)), (3, (14,))]
        found = aliases_on_path(path, {11, 13, 14, 99})
        assert found == {11: "m2", 13: "m2.3", 14: "m3"}
        assert alias_parts(2, (11, None, 13)) == ("m2", None, "m2.3")

    def test_the_earliest_record_holding_an_id_wins(self) -> None:
        path = [(1, (10, 11)), (2, (11,)), (1, (10,))]
        assert aliases_on_path(path, {10, 11}) == {10: "m1", 11: "m1.2"}

    def test_nothing_wanted_nothing_found(self) -> None:
        assert aliases_on_path([(1, (10,))], set()) == {}
