"""JSON from someone else (a model's tool arguments, a webhook body) decoded with bounds.

`json.loads` recurses once per nesting level: 600 levels of `[` in 3.6 kB of valid JSON
raise `RecursionError` (a crash, not a decoding error), and nothing limits the size. Here
the nesting depth is measured first in one linear pass over the structural characters, and
the text's length is checked, so a hostile document is a `ValueError` like any malformed
one: `JsonTooDeep` or `JsonTooLarge` (both subclasses of `ValueError`).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
"""Deeper than any Bot API update or tool argument object we read (they nest under 15)."""

# One character class: each match is one character, so the scan is linear.
_STRUCTURE = re.compile(r'["\\\[\]{}]')


class JsonTooDeep(ValueError):
    """The document nests deeper than allowed."""


class JsonTooLarge(ValueError):
    """The document is longer than allowed."""


def nesting_depth(text: str, *, stop_above: int | None = None) -> int:
    """The deepest nesting of arrays and objects in `text` (strings skipped; `text` need not
    be valid JSON). With `stop_above`, returns as soon as the depth exceeds it."""
    depth = deepest = 0
    in_string = False
    escaped_at = -2
    for match in _STRUCTURE.finditer(text):
        char, at = match.group(), match.start()
        if in_string:
            if escaped_at == at - 1:
                escaped_at = -2  # this character is escaped (an escaped backslash too)
            elif char == "\\":
                escaped_at = at
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def loads_bounded(text: str, *, max_depth: int = MAX_DEPTH, max_chars: int | None = None) -> Any:
    """`json.loads(text)` when `text` is at most `max_chars` long and nests at most
    `max_depth` deep; `JsonTooLarge` / `JsonTooDeep` otherwise (and `json.JSONDecodeError`
    for malformed text, as usual)."""
    if max_chars is not None and len(text) > max_chars:
        raise JsonTooLarge(f"{len(text)} characters, over the limit of {max_chars}")
    depth = nesting_depth(text, stop_above=max_depth)
    if depth > max_depth:
        raise JsonTooDeep(f"nested more than {max_depth} levels deep")
    return json.loads(text)
