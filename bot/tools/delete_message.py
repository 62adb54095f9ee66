"""delete_message: recall one message (one bubble) of the current chat."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, require_int


async def delete_message(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "message_id")
    await ctx.messenger.delete_message(ctx.chat_id, message_id)
    return json.dumps({"deleted": True})


TOOL = Tool(
    spec=ToolSpec(
        name="delete_message",
        description=(
            "Delete one message of the current chat by its alias (e.g. m7, or m7.2 for the "
            "second bubble of a multi-part reply). Deletes exactly one bubble."
        ),
        parameters={
            "type": "object",
            "properties": {"message_id": {"type": "string", "description": "message alias"}},
            "required": ["message_id"],
        },
    ),
    run=delete_message,
    summary="delete_message(message_id) — recall one message",
)
