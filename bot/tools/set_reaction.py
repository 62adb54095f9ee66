"""set_reaction: put an emoji reaction on a message of the current chat."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, require_int, require_str


async def set_reaction(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "message_id")
    emoji = require_str(args, "emoji", max_len=16)
    await ctx.messenger.set_reaction(ctx.chat_id, message_id, emoji)
    return json.dumps({"reacted": emoji})


TOOL = Tool(
    spec=ToolSpec(
        name="set_reaction",
        description="React to a message of the current chat with one emoji (e.g. 👍).",
        parameters={
            "type": "object",
            "properties": {
                "message_id": {"type": "string", "description": "message alias, e.g. m3"},
                "emoji": {"type": "string", "description": "one emoji"},
            },
            "required": ["message_id", "emoji"],
        },
    ),
    run=set_reaction,
    summary="set_reaction(message_id, emoji) — react to a message",
)
