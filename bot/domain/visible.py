"""Which text a reader cannot see: the one predicate every check of "invisible" uses.

Decided by Unicode category, not by a list, so characters added to Unicode later (and the
many a list forgets) are covered: controls (Cc), format characters (Cf: zero-width, bidi,
BOM, tags…), unassigned and surrogate code points (Cn, Cs), private use (Co), combining
marks that draw on the previous character or nothing (Mn, Me: U+034F, U+0301, the variation
selectors U+FE00–U+FE0F and U+E0100–U+E01EF…), and separators (Zs, Zl, Zp: every kind of
space). Letters that render as blank space are named here because their category says
"letter": the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and the Braille blank (U+2800).
"""

from __future__ import annotations

import unicodedata

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me", "Zl", "Zp", "Zs"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def is_invisible_char(char: str) -> bool:
    """Whether one character draws nothing on screen."""
    return char in _BLANK_LETTERS or unicodedata.category(char) in _INVISIBLE_CATEGORIES


def is_invisible(text: str) -> bool:
    """Whether `text` shows nothing at all (empty counts): a name made only of U+200E."""
    return all(is_invisible_char(char) for char in text)
