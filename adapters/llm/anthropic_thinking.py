"""Anthropic's thinking blocks as kept in a reply's `Reasoning`: read from a Messages
response (`anthropic_reasoning`) and laid back out for the next request (`anthropic_blocks`,
`anthropic_layout`), by the client wire and the tests' server wire alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.domain.messages import Reasoning

JSON = dict[str, Any]


def anthropic_blocks(reasoning: Reasoning | None) -> list[JSON]:
    """The `thinking` / `redacted_thinking` blocks kept for an Anthropic-wire message,
    exactly as received ([] for another format or a payload that is not a block list)."""
    if reasoning is None or reasoning.format != "anthropic" or not reasoning.payload:
        return []
    try:
        blocks = json.loads(reasoning.payload)
    except ValueError:
        return []
    if not isinstance(blocks, list):
        return []
    return [
        block
        for block in blocks
        if isinstance(block, dict) and block.get("type") not in (TEXT_MARK, TOOL_USE_MARK)
    ]


TEXT_MARK = "_text"
TOOL_USE_MARK = "_tool_use"
"""Where a thinking block stood among the others, when one came after a text or tool_use
block (interleaved thinking): `{"type": "_text"}`, `{"type": "_tool_use", "id": …}`."""


def anthropic_layout(reasoning: Reasoning | None) -> list[JSON] | None:
    """The kept thinking blocks with the places of the message's other blocks, when the
    thinking was interleaved with them; None when it all came first (the common case)."""
    if reasoning is None or reasoning.format != "anthropic" or not reasoning.payload:
        return None
    try:
        layout = json.loads(reasoning.payload)
    except ValueError:
        return None
    if not isinstance(layout, list) or not all(isinstance(item, dict) for item in layout):
        return None
    marks = (TEXT_MARK, TOOL_USE_MARK)
    return layout if any(item.get("type") in marks for item in layout) else None


def anthropic_reasoning(content: Sequence[Mapping[str, Any]]) -> Reasoning | None:
    """The reasoning of a Messages response from its content blocks in order: the thinking
    blocks whole; when one comes after a text or tool_use block (interleaved thinking),
    the places of those blocks too, so they go back in the order they came."""
    thinking = [block for block in content if block.get("type") in ANTHROPIC_THINKING]
    if not thinking:
        return None
    text = "\n\n".join(
        str(block.get("thinking", "")) for block in thinking if block.get("type") == "thinking"
    )
    last = max(i for i, block in enumerate(content) if block.get("type") in ANTHROPIC_THINKING)
    interleaved = any(block.get("type") not in ANTHROPIC_THINKING for block in content[:last])
    kept: list[dict[str, Any]] = []
    for block in content if interleaved else thinking:
        kind = block.get("type")
        if kind in ANTHROPIC_THINKING:
            kept.append(dict(block))
        elif kind == "text":
            kept.append({"type": TEXT_MARK})
        elif kind == "tool_use":
            kept.append({"type": TOOL_USE_MARK, "id": block.get("id")})
    payload = json.dumps(kept, ensure_ascii=False)
    return Reasoning(format="anthropic", text=text, payload=payload)


ANTHROPIC_THINKING = ("thinking", "redacted_thinking")


__all__ = [
    "ANTHROPIC_THINKING",
    "TEXT_MARK",
    "TOOL_USE_MARK",
    "anthropic_blocks",
    "anthropic_layout",
    "anthropic_reasoning",
]
