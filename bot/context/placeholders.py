"""Media placeholders: the short stand-ins a model sees instead of an attachment or a
non-text content, with the details people care about.

| kind               | zh                              | en                                     |
|--------------------|---------------------------------|----------------------------------------|
| `photo`            | `[图片]`                        | `[photo]`                              |
| `voice`            | `[语音 3s]`                     | `[voice 3s]`                           |
| `audio`            | `[音频 song.mp3 3s]`            | `[audio song.mp3 3s]`                  |
| `video`            | `[视频 12s]`                    | `[video 12s]`                          |
| `video_note`       | `[视频消息 5s]`                 | `[video message 5s]`                   |
| `animation`        | `[动图]`                        | `[GIF]`                                |
| `document`         | `[文件 name]`                   | `[file name]`                          |
| `sticker`          | `[贴纸 😀]`                     | `[sticker 😀]`                         |
| `live_photo`       | `[实况照片 3s]`                 | `[live photo 3s]`                      |
| `dice`             | `[骰子 🎲 4]`                   | `[dice 🎲 4]`                          |
| `location`         | `[位置 31.230, 121.474]`        | `[location 31.230, 121.474]`           |
| `venue`            | `[地点 Title, Address]`         | `[venue Title, Address]`               |
| `contact`          | `[联系人 Name]`                 | `[contact Name]`                       |
| `poll`             | `[投票 Best?: A / B]`           | `[poll Best?: A / B]`                  |
| `checklist`        | `[清单 Launch: ✓ Ship / Test]`  | `[checklist Launch: ✓ Ship / Test]`    |
| `game`             | `[游戏 Title]`                  | `[game Title]`                         |
| `invoice`          | `[账单 Title]`                  | `[invoice Title]`                      |
| `story`            | `[动态 Channel]`                | `[story Channel]`                      |
| `paid_media`       | `[付费内容 25 星]`              | `[paid media 25 stars]`                |
| `giveaway`         | `[抽奖 2 人中奖: Mug (Chan)]`   | `[giveaway 2 winners: Mug (Chan)]`     |
| `giveaway_winners` | `[抽奖结果 1 人中奖: Hal]`      | `[giveaway winners 1 winner: Hal]`     |
| `other`            | `[附件]`                        | `[attachment]`                         |
| `unknown`          | `[未知内容]`                    | `[unsupported content]`                |

Details are added when known, in the order: file name (files and audio), emoji, value,
title and detail, duration; a missing detail is left out (`[语音]`). Title and detail are cut
to 120 characters together (`…` marks the cut), so a long poll stays one short line.
Names, titles and options are member content: they pass through `escaping.inline_value`,
so a poll option like `x]\\n[Tool results]` cannot close the placeholder or start a line.
Coordinates are rounded to 3 decimals (about 100 m) when parsed: enough to say where,
not a doorstep. A transcribed voice or video note carries its words after the placeholder,
on the same line and through `inline_value` too: `[语音 12s] see you at noon`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.context.escaping import inline_value
from bot.domain.facts import Media, MediaKind
from bot.domain.ids import Locale
from bot.texts import in_locale

DETAIL_LIMIT = 120
ELLIPSIS = "…"

_LABELS: dict[MediaKind, tuple[str, str]] = {
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
    "other": ("附件", "attachment"),
    "dice": ("骰子", "dice"),
    "venue": ("地点", "venue"),
    "game": ("游戏", "game"),
    "story": ("动态", "story"),
    "invoice": ("账单", "invoice"),
    "paid_media": ("付费内容", "paid media"),
    "giveaway": ("抽奖", "giveaway"),
    "giveaway_winners": ("抽奖结果", "giveaway winners"),
    "checklist": ("清单", "checklist"),
    "live_photo": ("实况照片", "live photo"),
    "unknown": ("未知内容", "unsupported content"),
    "suggested_post": ("投稿", "suggested post"),
}

_LABEL_WORDS = sorted({word for pair in _LABELS.values() for word in pair}, key=len, reverse=True)
_LEADING_PLACEHOLDERS = re.compile(
    r"(?:\[(?:" + "|".join(map(re.escape, _LABEL_WORDS)) + r")(?: [^\[\]\n]*)?\] ?)+"
)

# Kinds whose value is a count of winners: a colon after it introduces the prize or names.
_COUNTED: frozenset[MediaKind] = frozenset({"giveaway", "giveaway_winners", "poll"})


def media_placeholder(media: Media, locale: Locale) -> str:
    """`[语音 3s]`, `[file report.pdf]`, `[poll Best?: A / B]`…: label plus known details."""
    zh, en = _LABELS[media.kind]
    parts = [in_locale(locale, zh=zh, en=en)]
    if media.file_name and media.kind in ("document", "audio"):
        parts.append(inline_value(media.file_name))
    if media.emoji:
        parts.append(inline_value(media.emoji))
    described = _described(media)
    if media.value is not None:
        value = _value(media.kind, media.value, locale)
        # "2 winners: Hal", "2 winners: Mug (Chan)", but "2 winners (Chan)"
        introduces = media.title if media.kind == "giveaway" else described
        parts.append(value + ":" if introduces and media.kind in _COUNTED else value)
    if described:
        parts.append(described)
    if media.closed:
        parts.append(in_locale(locale, zh="（已结束）", en="(closed)"))
    if media.duration is not None and media.duration >= 0:
        parts.append(f"{media.duration}s")
    placeholder = "[" + " ".join(part for part in parts if part) + "]"
    if media.transcript:  # a voice note's words, member content: one line, no brackets
        return f"{placeholder} {' '.join(inline_value(media.transcript).split())}"
    return placeholder


def media_placeholders(media: Sequence[Media], locale: Locale) -> str:
    """All placeholders of a message, space-separated; `""` without media."""
    return " ".join(media_placeholder(item, locale) for item in media)


def leading_placeholders(summary: str) -> tuple[str, str]:
    """`summary` split into the placeholders it starts with and the (member) text after them.

    A quote summary is our placeholders followed by member text (`[视频 12s] look`); only
    the member part is escaped. Placeholder details never hold brackets (`inline_value`).
    """
    match = _LEADING_PLACEHOLDERS.match(summary)
    end = match.end() if match else 0
    return summary[:end], summary[end:]


def _value(kind: MediaKind, value: int, locale: Locale) -> str:
    match kind:
        case "giveaway" | "giveaway_winners":
            winners = f"{value} winner" if value == 1 else f"{value} winners"
            return in_locale(locale, zh=f"{value} 人中奖", en=winners)
        case "paid_media":
            return in_locale(locale, zh=f"{value} 星", en=f"{value} stars")
        case "poll":
            votes = f"{value} vote" if value == 1 else f"{value} votes"
            return in_locale(locale, zh=f"{value} 票", en=votes)
        case _:
            return str(value)


def _described(media: Media) -> str:
    title = " ".join(inline_value(media.title or "").split())
    detail = " ".join(inline_value(media.detail or "").split())
    match media.kind:
        case "venue":
            text = ", ".join(part for part in (title, detail) if part)
        case "giveaway":  # the prize, then the chats to join
            text = " ".join(part for part in (title, f"({detail})" if detail else "") if part)
        case _:
            text = ": ".join(part for part in (title, detail) if part)
    if len(text) <= DETAIL_LIMIT:
        return text
    return text[: DETAIL_LIMIT - 1].rstrip() + ELLIPSIS
