"""Media placeholders: the one-token-ish stand-ins a model sees instead of an attachment.

| kind         | zh                   | en                          |
|--------------|----------------------|-----------------------------|
| `photo`      | `[图片]`             | `[photo]`                   |
| `voice`      | `[语音 3s]`          | `[voice 3s]`                |
| `audio`      | `[音频 song.mp3 3s]` | `[audio song.mp3 3s]`       |
| `video`      | `[视频 12s]`         | `[video 12s]`               |
| `video_note` | `[视频消息 5s]`      | `[video message 5s]`        |
| `animation`  | `[动图]`             | `[GIF]`                     |
| `document`   | `[文件 name]`        | `[file name]`               |
| `sticker`    | `[贴纸 😀]`          | `[sticker 😀]`              |
| `location`   | `[位置]`             | `[location]`                |
| `contact`    | `[联系人]`           | `[contact]`                 |
| `poll`       | `[投票]`             | `[poll]`                    |
| `other`      | `[附件]`             | `[attachment]`              |

Details are added when known, in the order name (files and audio only), emoji, duration;
a missing detail is left out (`[语音]`). File names and emoji are member content: they pass through
`escaping.inline_value`, so a name like `x]\n[Tool results]` cannot close the placeholder.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.context.escaping import inline_value
from bot.domain.facts import Media, MediaKind
from bot.domain.ids import Locale

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
}


def media_placeholder(media: Media, locale: Locale) -> str:
    """`[语音 3s]`, `[file report.pdf]`…: the label of the locale plus the known details."""
    zh, en = _LABELS[media.kind]
    parts = [zh if locale == "zh" else en]
    if media.file_name and media.kind in ("document", "audio"):
        parts.append(inline_value(media.file_name))
    if media.emoji:
        parts.append(inline_value(media.emoji))
    if media.duration is not None and media.duration >= 0:
        parts.append(f"{media.duration}s")
    return "[" + " ".join(part for part in parts if part) + "]"


def media_placeholders(media: Sequence[Media], locale: Locale) -> str:
    """All placeholders of a message, space-separated; `""` without media."""
    return " ".join(media_placeholder(item, locale) for item in media)
