"""Images on the OpenAI chat-completions wire: an image part, and tool results' images.

A tool message takes text only in chat completions, so the images a tool result carries go
in a user message right after the run of tool results (`with_tool_images`). Used by
`adapters.llm.openai_wire.to_request`; a turn that shows no image never calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.domain.messages import ChatMessage, ImagePart

JSON = dict[str, Any]


def image_part(image: ImagePart) -> JSON:
    """An image as a chat-completions content part."""
    return {"type": "image_url", "image_url": {"url": image.url}}


TOOL_IMAGES_BLOCK = "[Images from tool results]"
"""Opens the user message that carries tool results' images (chat completions takes no
image in a tool message); the labels of the images follow it."""


def with_tool_images(wire: list[JSON], messages: Sequence[ChatMessage]) -> list[JSON]:
    """`wire` with one user message after each run of tool results that carry images,
    holding those images: a tool message takes text only in chat completions. Added after
    the breakpoints are marked, which index `messages` (docs/architecture.md, Images)."""
    out: list[JSON] = []
    pending: list[ImagePart] = []
    for source, item in zip(messages, wire, strict=True):
        if pending and source.role != "tool":
            out.append(_tool_images_message(pending))
            pending = []
        out.append(item)
        if source.role == "tool":
            pending.extend(source.images)
    if pending:
        out.append(_tool_images_message(pending))
    return out


def _tool_images_message(images: Sequence[ImagePart]) -> JSON:
    labels = ", ".join(image.label for image in images if image.label)
    text = f"{TOOL_IMAGES_BLOCK} {labels}" if labels else TOOL_IMAGES_BLOCK
    parts: list[JSON] = [{"type": "text", "text": text}]
    parts.extend(image_part(image) for image in images)
    return {"role": "user", "content": parts}


__all__ = ("TOOL_IMAGES_BLOCK", "image_part", "with_tool_images")
