"""Grapheme boundaries: where a text may be cut without splitting a user-visible character
(`is_grapheme_boundary`, `safe_cut`), a practical subset of UAX #29."""

from __future__ import annotations

import unicodedata

_ZWJ = "\u200d"
_KEYCAP = "\u20e3"


def _extends(ch: str) -> bool:
    """True for characters that attach to the previous one (never start a new grapheme)."""
    code = ord(ch)
    return (
        ch in (_ZWJ, _KEYCAP)
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF  # skin tone modifiers
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences (subdivision flags)
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
    )


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def is_grapheme_boundary(text: str, index: int) -> bool:
    """Whether cutting `text` at `index` keeps every user-visible character whole.

    A practical subset of UAX #29: combining marks, variation selectors, ZWJ sequences,
    skin tones, keycaps, tag sequences, flag pairs and CR LF.
    """
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    if _extends(after) or before == _ZWJ:
        return False
    if before == "\r" and after == "\n":
        return False
    if _regional(before) and _regional(after):
        run = 0
        while index - 1 - run >= 0 and _regional(text[index - 1 - run]):
            run += 1
        return run % 2 == 0
    return True


def safe_cut(text: str, index: int) -> int:
    """`index` moved back to the nearest grapheme boundary (unchanged if none is found)."""
    cut = index
    while cut > 0 and not is_grapheme_boundary(text, cut):
        cut -= 1
    return cut if cut > 0 else index
