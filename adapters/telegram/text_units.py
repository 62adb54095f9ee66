"""Text as Telegram measures and marks it, and the one-line forms the model reads of it.

- Measures: UTF-16 code units (Telegram's limits and entity offsets); cuts only between
  graphemes (`adapters.telegram.graphemes`).
- The entities that carry meaning the text alone does not show, written into the text
  (`with_meaning`): a `text_link` "look here" reads `look here <https://…>`; a
  `text_mention` of a user without a username reads `Alice (user_id:1001)`. Every other
  entity (bold, code, spoilers, plain mentions and URLs already in the text) is formatting
  and stays out of the model's view. The walk is one pass over the entities in order.
- One-line quote summaries (`summarize`: at most 120 characters, media as placeholders) in
  the bot's locale.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from adapters.telegram.graphemes import safe_cut
from bot.context.placeholders import media_placeholder
from bot.domain.facts import Media
from bot.domain.ids import Locale as Locale


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (what Telegram's limits and entity offsets count)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def utf16_slice(text: str, offset: int, length: int) -> str:
    """The substring an entity's UTF-16 `offset`/`length` points at."""
    data = text.encode("utf-16-le")
    return data[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="ignore")


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
