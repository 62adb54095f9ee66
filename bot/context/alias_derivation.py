"""Message aliases `m<n>`: derived from platform ids along the active path.

`n` is the 1-based position, on the active path, of the record among records that have a
first confirmed platform id. A physical message seen again keeps its first alias; the later
bubbles of one reply are `m<n>.<slot>` (1-based delivery position) and take no new number.

See docs/architecture.md, Aliases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AliasAssignment:
    """`seq` is the record's ordinal (None without a confirmed id); `parts` one alias a slot."""

    seq: int | None
    parts: tuple[str | None, ...]


class AliasCounter:
    """Assigns aliases to records in active-path order, continuing after `last_seq`."""

    __slots__ = ("_seen", "last_seq")

    def __init__(self, last_seq: int = 0) -> None:
        self.last_seq = last_seq
        self._seen: dict[int, int] = {}

    def assign(self, message_ids: Sequence[int | None]) -> AliasAssignment:
        first = next((mid for mid in message_ids if mid is not None), None)
        if first is None:
            return AliasAssignment(None, (None,) * len(message_ids))
        seq = self._seen.get(first)
        if seq is None:
            self.last_seq += 1
            seq = self.last_seq
            self._seen[first] = seq
        parts: list[str | None] = []
        for slot, mid in enumerate(message_ids, start=1):
            if mid is None:
                parts.append(None)
            elif mid == first:
                parts.append(f"m{seq}")
            else:
                parts.append(f"m{seq}.{slot}")
        return AliasAssignment(seq, tuple(parts))
