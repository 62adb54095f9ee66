"""delete_message: recall one message (one bubble) of the current chat, with the rights of
the member who asked (`rights.MemberRights`): their own messages and the bot's, anyone's
for the owner and the chat's administrators. Once Telegram has deleted it, its content leaves
storage and the search index (`ToolContext.eraser`) and it renders `[deleted]` from then on,
in this turn's next calls too (`ToolContext.erased`). So does a message Telegram reports
gone ("message to delete not found"): someone deleted it before the bot could."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.errors import TelegramBadRequest, ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, forget_deleted, require_int, says_gone

REPLIES_STAY = (
    "its words are gone from your history, tool results included; your own replies that "
    "repeated them stay: say so, and offer to delete those too"
)
"""What the deletion leaves (docs/context-window.md, Deleted messages): the member learns it
from the model and may ask for the bot's replies to go as well."""


async def delete_message(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "message_id")
    if ctx.rights is None:
        raise ToolError("not allowed: no member's rights to act with", code="not_allowed")
    await ctx.rights.check_may_delete(ctx.chat_id, message_id, ctx.platform_messages)
    try:
        await ctx.messenger.delete_message(ctx.chat_id, message_id)
    except TelegramBadRequest as exc:
        if says_gone(exc):  # Telegram says it is gone already: so it is for us
            await forget_deleted(ctx, message_id)
        raise
    await forget_deleted(ctx, message_id)
    return json.dumps({"deleted": True, "note": REPLIES_STAY})


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
