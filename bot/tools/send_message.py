"""send_message: post a message in the current chat, optionally replying to one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, require_int, require_str


async def send_message(args: Mapping[str, Any], ctx: ToolContext) -> str:
    text = require_str(args, "text")
    reply_to = require_int(args, "reply_to_message_id") if "reply_to_message_id" in args else None
    delivery = await ctx.messenger.send_text(
        ctx.chat_id, text, thread_id=ctx.thread_id, reply_to=reply_to
    )
    if ctx.record_bubbles is not None:
        await ctx.record_bubbles(
            delivery.platform_messages(
                chat_id=ctx.chat_id,
                thread_id=ctx.thread_id,
                sender_id=ctx.bot_id,
                sender_name=ctx.bot_name,
                reply_to=reply_to,
                now=ctx.clock.now(),
            )
        )
    if not delivery.delivered:
        raise ToolError(f"the message was not delivered: {delivery.error}", code="not_delivered")
    sent = sum(mid is not None for mid in delivery.message_ids)
    result: dict[str, object] = {"sent": True, "bubbles": sent}
    if delivery.error is not None:
        result["partial"] = f"{len(delivery.message_ids) - sent} bubble(s) failed"
    return json.dumps(result)


TOOL = Tool(
    spec=ToolSpec(
        name="send_message",
        description=(
            "Send an extra message in the current chat. Use reply_to_message_id with a message "
            "alias such as m12 to reply to that message. Your normal answer is sent anyway; "
            "use this only for an additional, separate message."
        ),
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the message text"},
                "reply_to_message_id": {
                    "type": "string",
                    "description": "alias of the message to reply to, e.g. m12",
                },
            },
            "required": ["text"],
        },
    ),
    run=send_message,
    summary="send_message(text, reply_to_message_id?) — post an extra message",
)
