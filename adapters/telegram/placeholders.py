"""Media placeholders and one-line summaries (`[语音 3s]`, `[photo]`) in the bot's locale."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, assert_never

from adapters.telegram.text_units import safe_cut
from bot.domain.facts import Media

Locale = Literal["zh", "en"]

SUMMARY_LIMIT = 120

_WORDS: dict[str, tuple[str, str]] = {
    # kind: (zh, en)
    "photo": ("图片", "photo"),
    "voice": ("语音", "voice"),
    "audio": ("音频", "audio"),
    "video": ("视频", "video"),
    "video_note": ("视频消息", "video message"),
    "animation": ("动图", "GIF"),
    "document": ("文件", "file"),
    "sticker": ("贴纸", "sticker"),
    "location": ("位置", "location"),
    "contact": ("联系人", "contact"),
    "poll": ("投票", "poll"),
    "other": ("消息", "message"),
}


def media_placeholder(media: Media, locale: Locale) -> str:
    """`[图片]`, `[语音 3s]`, `[文件 report.pdf]`, `[贴纸 😀]`; English words when `en`."""
    zh, en = _WORDS[media.kind]
    word = zh if locale == "zh" else en
    detail: str | None
    match media.kind:
        case "voice" | "video" | "video_note" | "audio":
            detail = f"{media.duration}s" if media.duration is not None else None
            if media.kind == "audio" and media.file_name:
                detail = media.file_name
        case "document":
            detail = media.file_name
        case "sticker" | "other":
            detail = media.emoji
        case "photo" | "animation" | "location" | "contact" | "poll":
            detail = None
        case _:
            assert_never(media.kind)
    detail = " ".join(detail.split()) if detail else None
    return f"[{word} {detail}]" if detail else f"[{word}]"


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
