"""The text of a rich message (`rich_text`): its blocks one a line, its inline formatting
read through to the words."""

from __future__ import annotations

from typing import Any

from aiogram.types import Message


def rich_text(msg: Message) -> str:
    """The text of a rich message, one block a line (paragraphs, headings, list items, table
    cells); inline formatting (bold, links…) is read through to its words."""
    if msg.rich_message is None:
        return ""
    lines: list[str] = []
    _block_lines(msg.rich_message.model_dump(exclude_none=True), lines)
    return "\n".join(lines)


def _block_lines(node: Any, lines: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _block_lines(item, lines)
    elif isinstance(node, dict):
        if "text" in node:
            line = " ".join(_inline(node["text"]).split())
            if line:
                lines.append(line)
        for key, value in node.items():
            if key != "text" and isinstance(value, list | dict):
                _block_lines(value, lines)


def _inline(value: Any) -> str:
    """A rich text: a string, a list of rich texts, or a styled piece around one."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_inline(item) for item in value)
    if isinstance(value, dict):
        return _inline(value.get("text", ""))
    return ""
