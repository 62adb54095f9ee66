"""Message aliases `m<n>`: how they are derived, and the turn's table of the ones it showed.

Derived from platform ids along the active path (`AliasCounter`): `n` is the 1-based
position, on the active path, of the record among records that have a first confirmed
platform id. A physical message seen again keeps its first alias; the later bubbles of one
reply are `m<n>.<slot>` (1-based delivery position) and take no new number. See
docs/architecture.md, Aliases.

The turn's alias table holds the aliases the projection showed and rewrites tool arguments
with them. Before a tool runs, every message reference in its arguments becomes a platform id:
- keys `message_id`, `message_ids`, `messageId`, `messageIds`, `reference` and any key ending
  in `_message_id`, at any depth (so `message_id` inside structured reply segments too);
- in a reply segment (`{"type": "reply", …}`) also `id`, and `id` in its `data` object.
A value may be an alias (`m12`, `m7.3`, any case), a platform id the turn showed (an int or
a string of digits), or a list of those; `None` stays `None`. `reference` also accepts the
platform id of a quote the model was shown (`register_reference`). Anything else —
an alias the turn never showed, an `unknown` slot, an id from elsewhere — raises
`ReferenceNotConfirmed`: the model may act only on messages it was shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.errors import ReferenceNotConfirmed

_ALIAS = re.compile(r"m[0-9]+(?:\.[0-9]+)?", re.IGNORECASE)
_DIGITS = re.compile(r"[0-9]+")
_REFERENCE_KEYS = frozenset({"message_id", "message_ids", "messageId", "messageIds", "reference"})


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


def is_reference_key(key: str) -> bool:
    return key in _REFERENCE_KEYS or key.endswith("_message_id")


class AliasTable:
    """Alias → platform message id for one turn, filled with what the projection showed."""

    __slots__ = ("_aliases", "_references", "_shown_ids")

    def __init__(self) -> None:
        self._aliases: dict[str, int] = {}
        self._shown_ids: set[int] = set()
        self._references: set[int] = set()

    def register(self, alias: str, message_id: int) -> None:
        """Record that `alias` was shown for `message_id` (a turn's aliases are all of its
        chat); the first registration wins."""
        self._aliases.setdefault(alias.lower(), message_id)
        self._shown_ids.add(message_id)

    def register_reference(self, message_id: int) -> None:
        """A quoted message shown by platform id: a valid `reference` for the inspect tool."""
        self._references.add(message_id)

    def alias_of(self, message_id: int) -> str | None:
        """The first alias shown for `message_id` (what a tool result names it by)."""
        for alias, shown in self._aliases.items():
            if shown == message_id:
                return alias
        return None

    def resolve(self, reference: str) -> int:
        """The platform id of an alias (or of a shown id written as digits)."""
        return self._resolve(reference, allow_quoted=False)

    def rewrite_arguments(self, arguments: Mapping[str, object]) -> dict[str, object]:
        """A copy of `arguments` with every message reference rewritten to a platform id."""
        return self._rewrite_mapping(arguments)

    def rewrite_named(
        self, arguments: Mapping[str, object], names: frozenset[str]
    ) -> dict[str, object]:
        """A copy of `arguments` with the top-level arguments in `names` (and only those)
        rewritten: a tool that declares its message references (an MCP server's) may have an
        argument called `message_id` that means something else."""
        return {
            key: self._convert(value, allow_quoted=False) if key in names else value
            for key, value in arguments.items()
        }

    def _rewrite_mapping(self, mapping: Mapping[str, object]) -> dict[str, object]:
        reply_segment = mapping.get("type") == "reply"
        result: dict[str, object] = {}
        for key, value in mapping.items():
            if is_reference_key(key) or (reply_segment and key == "id"):
                result[key] = self._convert(value, allow_quoted=key == "reference")
            elif reply_segment and key == "data" and isinstance(value, Mapping):
                data = self._rewrite_mapping(value)
                if "id" in data:
                    data["id"] = self._convert(data["id"], allow_quoted=False)
                result[key] = data
            else:
                result[key] = self._rewrite_nested(value)
        return result

    def _rewrite_nested(self, value: object) -> object:
        if isinstance(value, Mapping):
            return self._rewrite_mapping(value)
        if isinstance(value, list | tuple):
            return [self._rewrite_nested(item) for item in value]
        return value

    def _convert(self, value: object, *, allow_quoted: bool) -> object:
        if value is None:
            return None
        if isinstance(value, list | tuple):
            return [self._convert(item, allow_quoted=allow_quoted) for item in value]
        if isinstance(value, int) and not isinstance(value, bool):
            return self._confirm_id(value, str(value), allow_quoted=allow_quoted)
        if isinstance(value, str):
            return self._resolve(value, allow_quoted=allow_quoted)
        raise ReferenceNotConfirmed(repr(value))

    def _resolve(self, reference: str, *, allow_quoted: bool) -> int:
        text = reference.strip()
        if _ALIAS.fullmatch(text):
            message_id = self._aliases.get(text.lower())
            if message_id is None:
                raise ReferenceNotConfirmed(reference)
            return message_id
        if _DIGITS.fullmatch(text):
            return self._confirm_id(int(text), reference, allow_quoted=allow_quoted)
        raise ReferenceNotConfirmed(reference)

    def _confirm_id(self, message_id: int, written: str, *, allow_quoted: bool) -> int:
        if message_id in self._shown_ids or (allow_quoted and message_id in self._references):
            return message_id
        raise ReferenceNotConfirmed(written)
