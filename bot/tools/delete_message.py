"""delete_message: recall one message (one bubble) of the current chat, with the rights of
the member who asked (`rights.MemberRights`): their own messages and the bot's, anyone's
for the owner and the chat's administrators."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, require_int


async def delete_message(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "message_id")
    if ctx.rights is None:
        raise ToolError("not allowed: no member's rights to act with", code="not_allowed")
    await ctx.rights.check_may_delete(ctx.chat_id, message_id, ctx.platform_messages)
    await ctx.messenger.delete_message(ctx.chat_id, message_id)
    return json.dumps({"deleted": True})


TOOL = Tool(
    spec=ToolSpec(
        name="delete_message",
        description=(
            "Delete one message of the current chat by its alias (e.g. m7, or m7.2 for the "
            "second bubble of a multi-part reply). Deletes exactly one bubble. Acts with the "
            "rights of the member who asked: their own messages and yours; other members' "
            "only for the owner or a chat administrator."
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
