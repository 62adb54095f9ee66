"""Images a turn shows the model: which media are images, how far each provider wants them
downscaled, what each costs in tokens, and the per-turn `[Images]` block that names them.

Pure: the shell (`bot.agent.turn_images`) fetches the files and calls these.

Sizes and token rules (docs/architecture.md, Images, documents and voice):
- Anthropic (docs.anthropic.com/en/docs/build-with-claude/vision): an image whose long edge
  is over 1568 px, or that is over about 1,600 tokens, is scaled down by the API; it costs
  `width × height / 750` tokens. We send it already within those bounds.
- OpenAI chat completions, `detail: high` (platform.openai.com/docs/guides/images-vision):
  the image is fitted into 2048 × 2048, then scaled so its short side is 768 px; it costs
  85 + 170 per 512 px tile. We send it at that size already, so nothing is wasted on the
  wire. OpenAI-compatible hosts (Gemini's, Qwen, OpenRouter…) are estimated by the same
  rule: they document their own, and the ledger's per-route correction leaves images out.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Literal

from bot.domain.facts import Media

ImageWire = Literal["openai", "anthropic"]

IMAGE_MIME_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
"""What the providers accept as images (both wires take these four)."""

MAX_SOURCE_PIXELS = 40_000_000
"""A file declaring more pixels than this is refused before it is decoded (a decompression
bomb: a few kilobytes that expand to gigabytes). 40 MP is above any phone camera's photo."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageBounds:
    """How large an image is sent: its long side, its short side and its pixel count at
    most (each 0 for no bound)."""

    long_side: int
    short_side: int = 0
    max_pixels: int = 0


ANTHROPIC_BOUNDS = ImageBounds(long_side=1568, max_pixels=1092 * 1092)
OPENAI_BOUNDS = ImageBounds(long_side=2048, short_side=768, max_pixels=2048 * 768)


def bounds_for(wire: ImageWire) -> ImageBounds:
    return ANTHROPIC_BOUNDS if wire == "anthropic" else OPENAI_BOUNDS


def fitted_size(width: int, height: int, bounds: ImageBounds) -> tuple[int, int]:
    """`width × height` scaled down (never up) to fit `bounds`, aspect kept."""
    if width <= 0 or height <= 0:
        return max(width, 0), max(height, 0)
    scale = 1.0
    if bounds.long_side:
        scale = min(scale, bounds.long_side / max(width, height))
    if bounds.short_side:
        scale = min(scale, bounds.short_side / min(width, height))
    if bounds.max_pixels:
        scale = min(scale, math.sqrt(bounds.max_pixels / (width * height)))
    if scale >= 1.0:
        return width, height
    # the epsilon keeps a side that lands exactly on a bound (1568.0 computed as 1567.99…)
    return max(1, math.floor(width * scale + 1e-6)), max(1, math.floor(height * scale + 1e-6))


def image_tokens_for(wire: ImageWire, width: int, height: int) -> int:
    """What one image of `width × height` (as sent) costs on `wire`."""
    if width <= 0 or height <= 0:
        return 0
    if wire == "anthropic":
        w, h = fitted_size(width, height, ANTHROPIC_BOUNDS)
        return math.ceil(w * h / 750)
    w, h = fitted_size(width, height, ImageBounds(long_side=2048, short_side=768))
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def data_url(media_type: str, data: bytes) -> str:
    """An image as the data URI both wires send."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def is_image(media: Media) -> bool:
    """A still image a model can be shown: a photo, an image document, a static sticker."""
    if media.file_id is None:
        return False
    if media.kind == "photo":
        return True
    if media.kind in ("document", "sticker"):
        return (media.mime_type or "").lower() in IMAGE_MIME_TYPES
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageSlot:
    """One image of the turn: the message it is in (`label`: its alias, or platform id) and
    what became of it: `sent` with its size, or `reason` it was not."""

    label: str
    quoted: bool = False
    sent: bool = False
    width: int = 0
    height: int = 0
    reason: str = ""


IMAGES_BLOCK = "[Images]"


def images_block(slots: tuple[ImageSlot, ...], *, vision: bool) -> str:
    """The per-turn block naming the turn's images: which ride on this message, which did
    not and why. Empty when the turn shows none."""
    if not slots:
        return ""
    lines = [IMAGES_BLOCK]
    if not vision:
        names = ", ".join(_name(slot) for slot in slots)
        lines.append(
            f"This model cannot see images here: {names} cannot be shown to you. "
            "If asked about them, say you cannot see images and ask for a description."
        )
        return "\n".join(lines)
    for slot in slots:
        if slot.sent:
            lines.append(f"- {_name(slot)}: attached below ({slot.width}x{slot.height})")
        else:
            lines.append(f"- {_name(slot)}: not attached: {slot.reason}")
    return "\n".join(lines)


def _name(slot: ImageSlot) -> str:
    return f"{slot.label} (quoted)" if slot.quoted else slot.label
