"""Image sizes and token rules per provider, which media are images, the `[Images]` block."""

from __future__ import annotations

import pytest

from bot.context.images import (
    ANTHROPIC_BOUNDS,
    OPENAI_BOUNDS,
    ImageSlot,
    fitted_size,
    image_tokens_for,
    images_block,
    is_image,
)
from bot.domain.facts import Media


@pytest.mark.parametrize(
    ("size", "bounds", "fitted"),
    [
        ((2560, 1920), OPENAI_BOUNDS, (1024, 768)),  # short side to 768
        ((800, 600), OPENAI_BOUNDS, (800, 600)),  # never up
        ((4000, 1000), OPENAI_BOUNDS, (2048, 512)),  # the 2048 square first
        ((2560, 1920), ANTHROPIC_BOUNDS, (1260, 945)),  # about 1,600 tokens
        ((3000, 500), ANTHROPIC_BOUNDS, (1568, 261)),  # the long edge
    ],
    ids=["openai-photo", "openai-small", "openai-panorama", "anthropic-photo", "anthropic-long"],
)
def test_images_are_sized_as_each_provider_would(
    size: tuple[int, int], bounds: object, fitted: tuple[int, int]
) -> None:
    assert fitted_size(*size, bounds) == fitted  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("wire", "size", "tokens"),
    [
        # OpenAI's worked examples: 1024x1024 high detail is 765; 2048x4096 is 1105
        ("openai", (1024, 1024), 765),
        ("openai", (2048, 4096), 1105),
        # Anthropic: width x height / 750; 1092x1092 is about 1590
        ("anthropic", (1092, 1092), 1590),
        ("anthropic", (200, 200), 54),
        ("openai", (0, 0), 0),
    ],
    ids=["openai-square", "openai-tall", "anthropic-square", "anthropic-small", "unknown"],
)
def test_image_tokens_follow_the_providers_rules(
    wire: str, size: tuple[int, int], tokens: int
) -> None:
    assert image_tokens_for(wire, *size) == tokens  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("media", "image"),
    [
        (Media(kind="photo", file_id="p"), True),
        (Media(kind="document", file_id="d", mime_type="image/png"), True),
        (Media(kind="document", file_id="d", mime_type="application/pdf"), False),
        (Media(kind="sticker", file_id="s", mime_type="image/webp"), True),
        (Media(kind="sticker", file_id="s"), False),  # animated or video sticker
        (Media(kind="photo"), False),  # nothing to fetch
        (Media(kind="voice", file_id="v"), False),
    ],
    ids=["photo", "png-document", "pdf", "static-sticker", "animated-sticker", "no-file", "voice"],
)
def test_which_media_are_images(media: Media, image: bool) -> None:
    assert is_image(media) is image


def test_the_block_names_every_image_and_why_one_was_not_sent() -> None:
    slots = (
        ImageSlot(label="m12", sent=True, width=1024, height=768),
        ImageSlot(label="m9", quoted=True, reason="the file is 31.0 MB, over the 20.0 MB limit"),
    )
    assert images_block(slots, vision=True) == (
        "[Images]\n"
        "- m12: attached below (1024x768)\n"
        "- m9 (quoted): not attached: the file is 31.0 MB, over the 20.0 MB limit"
    )
    blind = images_block(slots, vision=False)
    assert blind.startswith("[Images]\nThis model cannot see images here: m12, m9 (quoted)")
    assert images_block((), vision=True) == ""
