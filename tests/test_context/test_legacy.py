from __future__ import annotations

import pytest

from bot.context.legacy import is_per_turn_block, strip_per_turn_blocks, strip_per_turn_text
from bot.domain.records import ContentBlock


def text(value: str) -> ContentBlock:
    return ContentBlock(type="text", text=value)


def ref(key: str | None) -> ContentBlock:
    return ContentBlock(type="contextRef", key=key, text="...")


@pytest.mark.parametrize(
    ("block", "per_turn"),
    [
        (text("[Turn context]\ntime: 14:03"), True),
        (text("\n  [Already told the user]\n- x"), True),
        (text("hello [Turn context]"), False),
        (text("[Turn Context] other case"), False),
        (ref("deferred-tools"), True),
        (ref("workspace-rules"), True),
        (ref("skill:search"), True),
        (ref("file-memory:notes.md"), True),
        (ref("session-rules:42"), True),
        (ref("deferred-tools-2"), False),
        (ref("skill"), False),
        (ref("quote:9"), False),
        (ref(None), False),
    ],
    ids=[
        "turn context",
        "already told, after whitespace",
        "prefix not at the start",
        "prefix is case-sensitive",
        "deferred-tools",
        "workspace-rules",
        "skill:*",
        "file-memory:*",
        "session-rules:*",
        "exact keys match exactly",
        "a star key needs its colon",
        "other refs are conversation",
        "a ref without key",
    ],
)
def test_is_per_turn_block(block: ContentBlock, per_turn: bool) -> None:
    assert is_per_turn_block(block) is per_turn


def test_strip_per_turn_blocks_keeps_conversation_in_order() -> None:
    blocks = [text("hi"), text("[Turn context]\nx"), ref("skill:a"), ref("quote:1"), text("bye")]
    assert strip_per_turn_blocks(blocks) == (text("hi"), ref("quote:1"), text("bye"))


@pytest.mark.parametrize(
    ("flat", "expected"),
    [
        ("just talk\n\nmore talk", "just talk\n\nmore talk"),
        ("what did we decide?\n\n[Turn context]\ntime: 14:03\nmodel: x", "what did we decide?"),
        (
            "[Turn context]\ntime: 14:03\n\n[Already told the user]\n- Friday\n\nhello\n\n\nagain",
            "hello\n\n\nagain",
        ),
        ("a\n\n[Turn context]\nt\n\nb", "a\n\nb"),
        ("[Turn context]\nonly", ""),
        ("a\n \t\n[Already told the user]\n- y", "a"),
        ("a\n[Turn context] same paragraph", "a\n[Turn context] same paragraph"),
    ],
    ids=[
        "nothing per-turn: unchanged",
        "trailing block",
        "leading blocks, then conversation with its own separators",
        "block between two paragraphs",
        "nothing but context",
        "blank line with spaces separates",
        "prefix inside a paragraph is conversation",
    ],
)
def test_strip_per_turn_text(flat: str, expected: str) -> None:
    assert strip_per_turn_text(flat) == expected
