"""Which text a reader cannot see: the one predicate every part that asks uses."""

from __future__ import annotations

import unicodedata

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me", "Zl", "Zp", "Zs"})
"""Controls, format characters (U+200E, U+200B, U+2060…), unassigned and private-use code
points, combining marks with nothing to sit on, and every kind of space."""
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Letters and symbols that draw nothing: Hangul fillers and the blank Braille pattern."""


def is_invisible_char(char: str) -> bool:
    """Whether one character draws nothing on screen."""
    return char in _BLANK_LETTERS or unicodedata.category(char) in _INVISIBLE_CATEGORIES


def is_invisible(text: str) -> bool:
    """Whether `text` shows nothing at all (empty counts): a name made only of U+200E."""
    return all(is_invisible_char(char) for char in text)
