"""Characters a reader (or a model) takes for our separators and brackets.

Our headers and quote lines are built from four characters: `[` and `]` around them, `:`
between a field's name and value, `;` after each field. `lookalike(char)` says which of the
four a character reads as (None: none of them), decided in this order:

1. **NFKC.** A character whose compatibility form holds one of the four is that one:
   `；` (U+FF1B), `;` (U+037E GREEK QUESTION MARK), `﹔`, `：`, `﹕`, `［`, `﹇`…
2. **Category.** Opening punctuation (Ps) reads as `[` and closing punctuation (Pe) as `]`:
   `⁅ ⟦ 〔 ﹝ ⦃ ⦋ 【 ⌈ ❲`… and every bracket Unicode adds later. Left out are the pairs
   people write with every day, which read as themselves: parentheses, curly braces,
   angle brackets, CJK corner brackets and quotation marks (`( { 〈 《 「 『 „`, by the
   character's name, or by NFKC for `｛ ︷ ﹛`).
3. **A table** (from Unicode's TR39 confusables) of the characters no category gives away:
   letters, marks and symbols drawn as a colon (`ː ꞉ ः ։ ׃ ∶ ⁚ ᛬ ꓽ`…), as a semicolon
   (`؛ ⁏ ⸵ ፤`…) or as a square bracket (`⎡ ⊏ ⎦`…).

Each answer is kept per code point, so classifying a text is one pass over it (linear
whatever it holds); the table and the rules are what `tests/test_security` fuzz over the
Unicode blocks of punctuation and brackets.
"""

from __future__ import annotations

import unicodedata
from typing import Literal

Lookalike = Literal[";", ":", "[", "]"]

_EVERYDAY_NAMES = ("PARENTHESIS", "ANGLE", "CORNER BRACKET", "QUOTATION")
_EVERYDAY_FORMS = frozenset("(){}")
_COLONS = frozenset(
    "\u02d0\u02f8\u0589\u05c3\u0703\u0704\u0903\u0983\u0a83\u0c83\u0d83\u0f14\u1361\u1365"
    "\u1366\u16ec\u1803\u1804\u1809\u205a\u2236\u2982\ua4fd\ua789\ufe30"
)
"""ː ˸ ։ ׃ ܃ ܄ ः ঃ ઃ ಃ ඃ ༔ ፡ ፥ ፦ ᛬ ᠃ ᠄ ᠉ ⁚ ∶ ⦂ ꓽ ꞉ ︰"""
_SEMICOLONS = frozenset("\u061b\u1364\u204f\u236e\u2e35\ua6f6")
"""؛ ፤ ⁏ ⍮ ⸵ ꛶"""
_OPENING = frozenset("\u228f\u23a1\u23a2\u23a3\u2e22\u2e24")
"""⊏ ⎡ ⎢ ⎣ (and the half brackets ⸢ ⸤, Ps already)"""
_CLOSING = frozenset("\u2290\u23a4\u23a5\u23a6\u2e23\u2e25")
"""⊐ ⎤ ⎥ ⎦ (⸣ ⸥)"""

_known: dict[str, Lookalike | None] = {}


def lookalike(char: str) -> Lookalike | None:
    """Which of `;` `:` `[` `]` one character reads as (the character itself included)."""
    try:
        return _known[char]
    except KeyError:
        pass
    found = _classify(char)
    if len(_known) < 1 << 16:  # a flood of distinct code points cannot grow it for ever
        _known[char] = found
    return found


def _classify(char: str) -> Lookalike | None:
    if char in ";:[]":
        return char  # type: ignore[return-value]
    if char.isascii():
        return None
    form = unicodedata.normalize("NFKC", char)
    for mark in ";:[]":
        if mark in form:
            return mark  # type: ignore[return-value]
    if char in _COLONS:
        return ":"
    if char in _SEMICOLONS:
        return ";"
    if char in _OPENING:
        return "["
    if char in _CLOSING:
        return "]"
    category = unicodedata.category(char)
    if category not in ("Ps", "Pe") or _everyday(char, form):
        return None
    return "[" if category == "Ps" else "]"


def _everyday(char: str, form: str) -> bool:
    """A bracket people write with (and read as itself), not one of ours."""
    if form in _EVERYDAY_FORMS:
        return True
    name = unicodedata.name(char, "")
    return any(part in name for part in _EVERYDAY_NAMES)


def opens_like_a_bracket(char: str) -> bool:
    """True when `char` reads as an opening `[` (ours, or any look-alike)."""
    return lookalike(char) == "["
