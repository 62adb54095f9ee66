"""set_reaction: put an emoji reaction on a message of the current chat. When Telegram says
the message is gone, it is forgotten as a deleted one (`base.forget_deleted`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.errors import TelegramBadRequest
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, forget_deleted, require_int, require_str, says_gone


async def set_reaction(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "message_id")
    emoji = require_str(args, "emoji", max_len=16)
    try:
        await ctx.messenger.set_reaction(ctx.chat_id, message_id, emoji)
    except TelegramBadRequest as exc:
        if says_gone(exc):  # deleted in the chat meanwhile: forgotten here too
            await forget_deleted(ctx, message_id)
        raise
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
