"""Statements compiled once for the whole jobs of `storage.sqlite` and `storage.postgres`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

P = TypeVar("P")


class PreparedCache(Generic[P]):
    """`get` compiles a statement once (through `make`) and hands the same one back after;
    the key is the statement's id, checked against the statement kept beside it."""

    __slots__ = ("_known", "_make")

    def __init__(self, make: Callable[[Any, Sequence[str] | None], P]) -> None:
        self._make = make
        self._known: dict[tuple[int, tuple[str, ...] | None], tuple[Any, P]] = {}

    def get(self, statement: Any, column_keys: Sequence[str] | None = None) -> P:
        key = (id(statement), None if column_keys is None else tuple(column_keys))
        known = self._known.get(key)
        if known is None or known[0] is not statement:
            known = (statement, self._make(statement, column_keys))
            self._known[key] = known
        return known[1]
