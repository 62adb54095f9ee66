"""view_image: show the model an image posted earlier in this chat, by its message's alias.

The image comes back inside the turn only (docs/architecture.md, Images, documents and
voice): Anthropic reads it in the tool result, chat completions on a user message right
after the tool results. The stored result is the line `[image m12 viewed]`, which later
turns show as it is; the image itself is never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.context.images import bounds_for, data_url, image_tokens_for, is_image
from bot.domain.messages import ImagePart
from bot.errors import MediaRefused, ToolError
from bot.ports import ToolSpec
from bot.tools.base import ShownByTool, Tool, ToolContext, require_int

VIEW_IMAGE = "view_image"


def viewed_line(label: str) -> str:
    return f"[image {label} viewed]"


async def view_image(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "reference")
    media = ctx.media
    if media is None or media.files is None:
        raise ToolError("images cannot be fetched here", code="unavailable")
    if not media.vision:
        raise ToolError(
            "this model cannot see images: say so, and ask for a description", code="no_vision"
        )
    # this chat only: a message of another chat (and its file) is not found here
    message = await ctx.platform_messages.find_platform_message(ctx.chat_id, message_id)
    if message is None:
        raise ToolError("that message is not known in this chat", code="not_found")
    label = (ctx.shown.alias_of(message_id) if ctx.shown else None) or str(message_id)
    images = [m for m in message.media if is_image(m)]
    if not images:
        kinds = ", ".join(m.kind for m in message.media) or "text only"
        raise ToolError(f"{label} holds no image ({kinds})", code="no_image")
    try:
        fetched = await media.files.image(images[0], bounds_for(media.wire))
    except MediaRefused as refused:
        reason = f"the image of {label} was not fetched: {refused.reason}"
        raise ToolError(reason, code="refused") from None
    if isinstance(ctx.shown, ShownByTool):  # the line goes with the message, should it be deleted
        ctx.shown.carry(message_id)
    media.shown.append(
        ImagePart(
            url=data_url(fetched.media_type, fetched.data),
            width=fetched.width,
            height=fetched.height,
            tokens=image_tokens_for(media.wire, fetched.width, fetched.height),
            label=label,
        )
    )
    return viewed_line(label)


TOOL = Tool(
    spec=ToolSpec(
        name=VIEW_IMAGE,
        description=(
            "See an image posted earlier in this chat (a photo, image file or sticker): pass "
            "its message's alias (m12). The image comes back with the result, for this turn."
        ),
        parameters={
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "the message's alias, e.g. m12"}
            },
            "required": ["reference"],
        },
    ),
    run=view_image,
    summary="view_image(reference) — see an earlier photo or image by its alias",
)
