"""Text as Telegram measures and marks it, and the one-line forms the model reads of it.

- Measures: UTF-16 code units (Telegram's limits and entity offsets), cuts only between
  graphemes.
- The entities that carry meaning the text alone does not show, written into the text
  (`with_meaning`): a `text_link` "look here" reads `look here <https://…>`; a
  `text_mention` of a user without a username reads `Alice (user_id:1001)`. Every other
  entity (bold, code, spoilers, plain mentions and URLs already in the text) is formatting
  and stays out of the model's view. The walk is one pass over the entities in order.
- One-line quote summaries (`summarize`: at most 120 characters, media as placeholders) in
  the bot's locale.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from bot.context.placeholders import media_placeholder
from bot.domain.facts import Media
from bot.domain.ids import Locale as Locale

_ZWJ = "\u200d"
_KEYCAP = "\u20e3"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (what Telegram's limits and entity offsets count)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def utf16_slice(text: str, offset: int, length: int) -> str:
    """The substring an entity's UTF-16 `offset`/`length` points at."""
    data = text.encode("utf-16-le")
    return data[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="ignore")


def prefix_fitting(text: str, limit: int) -> int:
    """The largest character index whose prefix is at most `limit` UTF-16 units long."""
    units = 0
    for index, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return index
    return len(text)


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


# ---------------------------------------------------------------- entities with meaning

_MEANINGFUL = frozenset({"text_link", "text_mention"})


def with_meaning(text: str, entities: Sequence[Any] | None) -> str:
    """`text` with each link's URL and each text mention's user id after its words."""
    if not text or not entities:
        return text
    inserts: list[tuple[int, str]] = []  # (UTF-16 end offset, what to add there)
    for entity in entities:
        if entity.type not in _MEANINGFUL:
            continue
        end = entity.offset + entity.length
        if entity.type == "text_link" and entity.url:
            inserts.append((end, f" <{entity.url}>"))
        elif entity.type == "text_mention" and entity.user is not None:
            inserts.append((end, f" (user_id:{entity.user.id})"))
    if not inserts:
        return text
    inserts.sort(key=lambda item: item[0])
    out: list[str] = []
    units = 0  # UTF-16 position of `index` in `text`
    index = 0
    copied = 0  # how much of `text` is already in `out`
    for end, addition in inserts:
        while index < len(text) and units < end:
            units += utf16_len(text[index])
            index += 1
        out.append(text[copied:index])
        out.append(addition)
        copied = index
    out.append(text[copied:])
    return "".join(out)


# ---------------------------------------------------------------- one-line summaries

SUMMARY_LIMIT = 120


def one_line(text: str) -> str:
    """Every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(text.split())


def summarize(
    text: str, media: Iterable[Media], locale: Locale, *, limit: int = SUMMARY_LIMIT
) -> tuple[str, bool]:
    """Placeholders then text on one line, cut to `limit` characters; `(summary, truncated)`."""
    parts = [media_placeholder(m, locale) for m in media]
    parts.append(text)
    line = one_line(" ".join(parts))
    if len(line) <= limit:
        return line, False
    return line[: safe_cut(line, limit)].rstrip(), True
