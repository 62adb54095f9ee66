"""Per-turn context left in legacy rows, recognised and stripped at projection (never rewritten).

Accepted legacy shape: a user message's content is either a flat string, or a list of
blocks, each `{"type": "text", "text": ...}` or `{"type": "contextRef", "key": ..., "text":
...}` (read into `bot.domain.records.ContentBlock`). Per-turn context is:

- a text block whose text starts (after leading whitespace) with `[Turn context]` or
  `[Already told the user]`;
- a contextRef block whose key is `deferred-tools` or `workspace-rules`, or starts with
  `skill:`, `file-memory:` or `session-rules:`;
- in a flat string, every blank-line-separated paragraph that starts with one of the two
  prefixes. The per-turn part runs paragraph by paragraph and ends at the first paragraph
  that does not start with a prefix: that one is conversation again and is kept.

These rules apply only to legacy rows (`UserRecord.legacy`, marked when imported), written
before per-turn context left storage; new rows carry conversation only and are never
stripped, so a member who types `[Turn context]` keeps the words (escaped). A member's line
starting with `[Turn context]` inside a legacy row is lost: such rows cannot tell the two
apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import assert_never

from bot.domain.records import ContentBlock

PER_TURN_PREFIXES = ("[Turn context]", "[Already told the user]")
PER_TURN_REF_KEYS = (
    "deferred-tools",
    "workspace-rules",
    "skill:*",
    "file-memory:*",
    "session-rules:*",
)
"""Keys of per-turn context references; a trailing `*` matches any rest of the key."""

_EXACT_KEYS = frozenset(k for k in PER_TURN_REF_KEYS if not k.endswith("*"))
_KEY_PREFIXES = tuple(k[:-1] for k in PER_TURN_REF_KEYS if k.endswith("*"))
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")


def is_per_turn_ref_key(key: str | None) -> bool:
    return key is not None and (key in _EXACT_KEYS or key.startswith(_KEY_PREFIXES))


def _starts_per_turn(text: str) -> bool:
    return text.lstrip().startswith(PER_TURN_PREFIXES)


def is_per_turn_block(block: ContentBlock) -> bool:
    match block.type:
        case "text":
            return _starts_per_turn(block.text)
        case "contextRef":
            return is_per_turn_ref_key(block.key)
        case _:
            assert_never(block.type)


def strip_per_turn_blocks(blocks: Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    return tuple(block for block in blocks if not is_per_turn_block(block))


def strip_per_turn_text(text: str) -> str:
    """A flat legacy text without its per-turn paragraphs; unchanged when it has none.

    The separators between the paragraphs that stay are kept as they were; whitespace left
    dangling at either end by a removed paragraph goes with it.
    """
    pieces: list[tuple[str, str]] = []  # (separator before, paragraph)
    position = 0
    separator = ""
    for match in _PARAGRAPH_BREAK.finditer(text):
        pieces.append((separator, text[position : match.start()]))
        separator = match.group()
        position = match.end()
    pieces.append((separator, text[position:]))
    kept = [(sep, para) for sep, para in pieces if not _starts_per_turn(para)]
    if len(kept) == len(pieces):
        return text
    if not kept:
        return ""
    # the first paragraph that stays loses the separator that joined it to a removed one
    return "".join([kept[0][1], *(sep + para for sep, para in kept[1:])]).strip("\n")
