"""inspect_conversation_reference: read a quoted message in full, and what it replied to."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, require_int

MAX_DEPTH = 2
MAX_ENTRIES = 50
MAX_CHARS = 12_000


async def inspect_conversation_reference(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "reference")
    depth = args.get("depth", 0)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise ToolError(f"depth must be an integer from 0 to {MAX_DEPTH}", code="bad_arguments")
    entries: list[dict[str, object]] = []
    seen: set[int] = set()
    next_id: int | None = message_id
    budget = MAX_CHARS
    for _level in range(depth + 1):
        if next_id is None or next_id in seen or len(entries) >= MAX_ENTRIES:
            break
        seen.add(next_id)
        message = await ctx.platform_messages.find_platform_message(ctx.chat_id, next_id)
        if message is None:
            if not entries:
                raise ToolError("that message is not known in this chat", code="not_found")
            break
        text = message.text[:budget]
        budget -= len(text)
        entries.append(
            {
                "message_id": message.message_id,
                "sender_id": message.sender_id,
                "sender": message.sender_name,
                "time": message.date.isoformat(timespec="minutes"),
                "text": text,
                "truncated": len(text) < len(message.text),
                "media": [m.kind for m in message.media],
                "reply_to": message.reply_to_message_id,
            }
        )
        if budget <= 0:
            break
        next_id = message.reply_to_message_id
    return json.dumps({"entries": entries}, ensure_ascii=False)


TOOL = Tool(
    spec=ToolSpec(
        name="inspect_conversation_reference",
        description=(
            "Read a referenced message in full: pass its alias (m9) or the quoted message id. "
            "depth 1 or 2 also returns the message it replied to, and that one's target."
        ),
        parameters={
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "alias or quoted message id"},
                "depth": {"type": "integer", "minimum": 0, "maximum": MAX_DEPTH},
            },
            "required": ["reference"],
        },
    ),
    run=inspect_conversation_reference,
    summary="inspect_conversation_reference(reference, depth=0..2) — read a quote in full",
)
