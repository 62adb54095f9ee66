"""Escaping member content so nobody can forge a block the system writes by typing it.

The system frames conversation with bracketed blocks: the header (`[id:…]`), the quote
line (`[quote …]`), the forward line, `[event]`, the `[Tool results]` carrier, the
breadcrumb, `[Summary of earlier conversation …]`, the per-turn blocks (`[Turn context]`,
`[Already told the user]`, `[Reactions since your last reply]`, `[Workspace rules]`,
`[Tool index]`…) and `[Untrusted conversation references]` — and more names get added.

Rule (chosen over a list of names): in member content (text, captions, quotes, event
text; names and options go through `inline_value`) every line that opens with an opening
bracket followed by a word is escaped. "Opens" allows leading whitespace and invisible
characters (C0/C1 controls, zero-width, bidi, soft hyphen, BOM) before the bracket and
between the bracket and the word; the brackets are `[`, full-width `［`, `【`, `〖`, `〘`
and `〚`; "a word" is any letter or digit in any script. A list of names failed once
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
brackets, and in a header no `;`.
"""

from __future__ import annotations

import re

_INVISIBLE = (
    r"[\s\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e"
    r"\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)
OPENING_BRACKETS = "[［【〖〘〚"
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
_FIELD = "(?:" + "|".join(HEADER_FIELDS) + ")"
_RESERVED_LINE = re.compile(
    rf"^({_INVISIBLE}*)(\\*)([{re.escape(OPENING_BRACKETS)}]{_INVISIBLE}*[^\W_])",
)

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

_ECHOED_HEADER = re.compile(
    rf"[ \t\r\n\ufeff]*\[(?:[ \t]*{_FIELD}[ \t]*:[^;\[\]\n]*;?)+[ \t]*\][ \t]*(?:\r?\n)?",
    re.IGNORECASE,
)


def escape_member_text(text: str) -> str:
    """`text` with a backslash before the bracket of every line that opens a reserved marker."""
    if not any(bracket in text for bracket in OPENING_BRACKETS):
        return text
    return "".join(
        _RESERVED_LINE.sub(r"\1\\\2\3", line, count=1) for line in text.splitlines(keepends=True)
    )


def inline_value(text: str) -> str:
    """A value inside one of our brackets: no line breaks, controls, bidi marks or brackets."""
    return text.translate(_INLINE_TABLE)


def header_value(text: str) -> str:
    """A header field value: like `inline_value`, and `;` (the field separator) becomes `,`."""
    return text.translate(_HEADER_TABLE)


def strip_echoed_header(reply: str) -> str:
    """The model's reply without the header line(s) it echoed at its very start.

    Only a leading run of headers is removed (with the whitespace before each and the line
    break after it); everything after them is returned byte-exact.
    """
    position = 0
    while match := _ECHOED_HEADER.match(reply, position):
        position = match.end()
    return reply[position:]
