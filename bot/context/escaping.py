"""Escaping member content so nobody can forge a block the system writes by typing it.

The system frames conversation with bracketed blocks: the header (`[id:…]`), the quote
line (`[quote …]`), the forward line, `[event]`, the `[Tool results]` carrier, the
breadcrumb, `[Summary of earlier conversation …]`, the per-turn blocks (`[Turn context]`,
`[Already told the user]`, `[Reactions since your last reply]`, `[Workspace rules]`,
`[Tool index]`…) and `[Untrusted conversation references]` — and more names get added.

Rule (chosen over a list of names): in member content (text, captions, quotes, event
text; names and options go through `inline_value`) every line that opens with an opening
bracket followed by a word is escaped. "Opens" allows leading whitespace and invisible
characters before the bracket and between the bracket and the word, "invisible" decided by
Unicode category (`is_invisible_char`, below: controls, format characters,
combining marks, variation selectors, separators, Hangul fillers…); the brackets are `[`
and everything a reader takes for one (`bot.context.confusables`: full-width `［`, `【`,
`〖`, `⁅`, `⟦`, `〔`, `﹝`, `⦃`, `⦋`… by NFKC and category, not the everyday `(`, `{`, `《`,
`「`); "a word" is any letter or digit in any script. Both scans here (this one and the
echoed header) are hand-written single passes, not regular expressions: member and model
text can make a backtracking pattern take exponential time. A list of names failed once
already (new blocks slipped through unescaped), and every future block name is covered
without anyone remembering to add it; the cost is a backslash before a member's
`[1] footnote` or `[link](url)` line, which reads the same to a model.

The escape puts one backslash before the bracket: `[Tool results]` → `\\[Tool results]`. A
line that already has backslashes there gets one more (`\\[id:` → `\\\\[id:`), so the
escape stays unambiguous. Every other line is left byte-exact. Line breaks are whatever
`str.splitlines` breaks on (also `\\r`, `\\u2028`, `\\x85`…), since a model may read any
of them as a new line.

Values we put inside a bracket (names, ids, file names, poll options) go through
`inline_value` / `header_value` instead: no line breaks, control or bidi characters, no
brackets, and in a header no `;`. "Brackets" and "`;`" include their look-alikes
(`confusables.lookalike`): a `[`-like character becomes `(`, a `]`-like one `)`, a
`;`-like one `,` and a `:`-like one a plain `:` (harmless inside a value, and now plainly
what it is), so `Eve;owner:true` (U+037E) cannot add a field. A value of ASCII and
everyday characters comes out exactly as before (caches hold).
"""

from __future__ import annotations

import unicodedata

from bot.context.confusables import lookalike, opens_like_a_bracket

OPENING_BRACKETS = "[［【〖〘〚"
"""The commonest opening brackets (every look-alike counts: `opens_like_a_bracket`)."""
HEADER_FIELDS = (
    "id",
    "parts",
    "user",
    "user_id",
    "owner",
    "origin",
    "via",
    "date",
    "time",
    "reply_to",
)
_FIELDS = frozenset(HEADER_FIELDS)
_HEADER_LEAD = frozenset(" \t\r\n\ufeff")

# Line breaks and C0/C1 controls become a space; bidi controls and the BOM are dropped
# (they only reorder or hide text); zero-width joiners stay, emoji need them.
_INLINE_TABLE: dict[int, str | None] = {
    **dict.fromkeys(range(0x00, 0x20), " "),
    **dict.fromkeys(range(0x7F, 0xA0), " "),
    0x2028: " ",
    0x2029: " ",
    **dict.fromkeys((0x061C, 0x200E, 0x200F, 0xFEFF)),
    **dict.fromkeys(range(0x202A, 0x202F)),
    **dict.fromkeys(range(0x2066, 0x206A)),
    ord("["): "(",
    ord("]"): ")",
    **dict.fromkeys(map(ord, "［【〖〘〚"), "（"),
    **dict.fromkeys(map(ord, "］】〗〙〛"), "）"),
}
_HEADER_TABLE: dict[int, str | None] = {**_INLINE_TABLE, ord(";"): ","}


def escape_member_text(text: str) -> str:
    """`text` with a backslash before the bracket of every line that opens a reserved marker."""
    if text.isascii() and "[" not in text:
        return text
    return "".join(_escaped_line(line) for line in text.splitlines(keepends=True))


def _escaped_line(line: str) -> str:
    """`line` with a backslash before its bracket when it opens a reserved marker.

    One pass over the opening characters (no regular expression, so no backtracking):
    invisible characters and backslashes, a bracket, invisible characters, a word character.
    """
    at = 0
    while at < len(line) and (line[at] == "\\" or is_invisible_char(line[at])):
        at += 1
    if at == len(line) or not opens_like_a_bracket(line[at]):
        return line
    word = at + 1
    while word < len(line) and is_invisible_char(line[word]):
        word += 1
    if word == len(line) or not line[word].isalnum():
        return line
    return line[:at] + "\\" + line[at:]


def inline_value(text: str) -> str:
    """A value inside one of our brackets: no line breaks, controls, bidi marks or brackets
    (nor their look-alikes)."""
    value = text.translate(_INLINE_TABLE)
    return value if value.isascii() else "".join(map(_INLINE_LOOKALIKES.__getitem__, value))


def header_value(text: str) -> str:
    """A header field value: like `inline_value`, and `;` (the field separator) becomes `,`
    (its look-alikes too, and a look-alike `:` a plain one)."""
    value = text.translate(_HEADER_TABLE)
    return value if value.isascii() else "".join(map(_HEADER_LOOKALIKES.__getitem__, value))


def escape_every_bracket(text: str) -> str:
    """One line of member text after our fields (a search hit): a backslash before every
    opening bracket and look-alike, not only a line's first, so no part of it can pass for
    one of our markers."""
    if text.isascii():
        return text.replace("[", "\\[")
    return "".join("\\" + c if opens_like_a_bracket(c) else c for c in text)


class _Lookalikes(dict[str, str]):
    """What a value shows for each character, worked out once per character it meets
    (`__missing__`): brackets and their look-alikes → parentheses; in a header, `;`-like →
    `,` and `:`-like → `:` (`separators`)."""

    __slots__ = ("_separators",)

    def __init__(self, *, separators: bool) -> None:
        super().__init__()
        self._separators = separators

    def __missing__(self, char: str) -> str:
        match lookalike(char):
            case "[":
                shown = "("
            case "]":
                shown = ")"
            case ";" if self._separators:
                shown = ","
            case ":" if self._separators:
                shown = ":"
            case _:
                shown = char
        if len(self) < 1 << 16:
            self[char] = shown
        return shown


_INLINE_LOOKALIKES = _Lookalikes(separators=False)
_HEADER_LOOKALIKES = _Lookalikes(separators=True)


def strip_echoed_header(reply: str) -> str:
    """The model's reply without the header line(s) it echoed at its very start.

    Only a leading run of headers is removed (with the whitespace before each and the line
    break after it); everything after them is returned byte-exact.
    """
    position = 0
    while (end := _echoed_header_end(reply, position)) is not None:
        position = end
    return reply[position:]


def _echoed_header_end(reply: str, start: int) -> int | None:
    """Where one echoed header that begins at `start` (after whitespace) ends, or None.

    A header is `[`, then `field:value` parts separated by `;` (the last `;` optional; a
    field one of `HEADER_FIELDS`, any case, spaces around it; a value without `;`, brackets
    or a line break), then `]`, spaces and one optional line break. Scanned once, left to
    right: linear in the length of the header, whatever the reply holds.
    """
    at = start
    while at < len(reply) and reply[at] in _HEADER_LEAD:
        at += 1
    if at == len(reply) or reply[at] != "[":
        return None
    close = at + 1
    while close < len(reply) and reply[close] not in "[]\n":
        close += 1
    if close == len(reply) or reply[close] != "]":
        return None
    inner = reply[at + 1 : close].rstrip(" \t")
    if inner.endswith(";"):
        inner = inner[:-1]
    for part in inner.split(";"):
        name, colon, _value = part.partition(":")
        name = name.strip(" \t")
        if not colon or not name.isascii() or name.lower() not in _FIELDS:
            return None
    end = close + 1
    while end < len(reply) and reply[end] in " \t":
        end += 1
    if reply.startswith("\r\n", end):
        return end + 2
    if reply.startswith("\n", end):
        return end + 1
    return end


# Which text a reader cannot see: the one predicate every check of "invisible" uses.
#
# Decided by Unicode category, not by a list, so characters added to Unicode later (and the
# many a list forgets) are covered: controls (Cc), format characters (Cf: zero-width, bidi,
# BOM, tags…), unassigned and surrogate code points (Cn, Cs), private use (Co), combining
# marks that draw on the previous character or nothing (Mn, Me: U+034F, U+0301, the variation
# selectors U+FE00–U+FE0F and U+E0100–U+E01EF…), and separators (Zs, Zl, Zp: every kind of
# space). Letters that render as blank space are named here because their category says
# "letter": the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and the Braille blank (U+2800).
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me", "Zl", "Zp", "Zs"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def is_invisible_char(char: str) -> bool:
    """Whether one character draws nothing on screen (see the comment above)."""
    return char in _BLANK_LETTERS or unicodedata.category(char) in _INVISIBLE_CATEGORIES


def is_invisible(text: str) -> bool:
    """Whether `text` shows nothing at all (empty counts): a name made only of U+200E."""
    return all(is_invisible_char(char) for char in text)
