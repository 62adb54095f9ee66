"""One-line quote summaries (at most 120 characters, media as placeholders) in the bot's locale."""

from __future__ import annotations

from collections.abc import Iterable

from adapters.telegram.text_units import safe_cut
from bot.context.placeholders import media_placeholder
from bot.domain.facts import Media
from bot.domain.ids import Locale as Locale

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
