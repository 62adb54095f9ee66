"""`python -m bench.bench_images [--messages 400] [--seed 43]`: the ADR group workload with
10 % of the messages carrying a photo, through the real runtime with vision on, against the
same workload as text only.

Both runs are the same bot with vision on (`view_image` offered); only the photos differ.
Photos are per-turn material (docs/architecture.md, Images, documents and voice): the
current turn's ride on its current message and the history keeps the placeholder, so the
prefix the provider cached is the text-only run's. Target: the simulated prefix-cache hit
stays within 3 points of the text-only run. The images row: how many images were sent,
tokens per image (OpenAI's tile rule at the size we send: a 1280x960 photo goes as
1024x768, 765 tokens), and what each image sent added to the input cost at the economy
bench's example prices.

The photos are real JPEGs (a different one per message), verified and downscaled by the same
code the bot runs (`adapters.media_files.prepare_image`); only the download is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from adapters.media_files import prepare_image
from bench import economy
from bench.workload import ChatEvent, Workload, generate
from bot.context.images import ImageBounds
from bot.domain.facts import Media
from bot.errors import MediaRefused
from bot.ports import DocumentText, FetchedImage

PHOTO_SHARE = 0.10
TARGET_POINTS = 3.0
PHOTO_SIZE = (1280, 960)  # the largest size Telegram keeps of a phone photo


class BenchFiles:
    """`MediaFiles` over photos made on the spot: one JPEG per file id, decoded and
    downscaled like a downloaded one."""

    def __init__(self) -> None:
        self.fetched = 0

    async def image(self, media: Media, bounds: ImageBounds) -> FetchedImage:
        self.fetched += 1
        seed = sum(map(ord, media.file_id or ""))
        colour = (seed * 37 % 256, seed * 91 % 256, seed * 53 % 256)
        out = io.BytesIO()
        Image.new("RGB", PHOTO_SIZE, colour).save(out, format="JPEG", quality=85)
        return prepare_image(out.getvalue(), bounds)

    async def text(self, media: Media, *, page: int | None, max_chars: int) -> DocumentText:
        raise NotImplementedError  # the workload posts no documents

    async def file(self, media: Media) -> bytes:
        raise NotImplementedError

    async def prepare(self, raw: bytes, bounds: ImageBounds) -> FetchedImage:
        raise MediaRefused("no tool images here")

    def prefetch(self, media: Media) -> None:
        return None


def photos_of(seed: int, share: float = PHOTO_SHARE) -> Callable[[ChatEvent], tuple[Media, ...]]:
    """A photo on about `share` of the messages, the same ones for a seed."""

    def photos(event: ChatEvent) -> tuple[Media, ...]:
        if random.Random(seed * 1_000_003 + event.index).random() >= share:
            return ()
        width, height = PHOTO_SIZE
        return (
            Media(
                kind="photo",
                file_id=f"photo-{event.message_id}",
                file_unique_id=f"u{event.message_id}",
                width=width,
                height=height,
                mime_type="image/jpeg",
            ),
        )

    return photos


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagesResult:
    messages: int
    photo_messages: int
    images_sent: int
    image_tokens: int
    text: economy.Figures
    photos: economy.Figures

    @property
    def points(self) -> float:
        return (self.text.hit_rate - self.photos.hit_rate) * 100

    @property
    def tokens_per_image(self) -> float:
        return self.image_tokens / self.images_sent if self.images_sent else 0.0

    @property
    def cost_per_image(self) -> float:
        """What the photos added to the input cost, per image sent (an image a turn's tool
        loop sends again on each of its calls counts each time)."""
        if not self.images_sent:
            return 0.0
        return (self.photos.input_cost - self.text.input_cost) / self.images_sent

    def targets(self) -> list[tuple[str, str, bool | None]]:
        return [
            (
                f"photos on {PHOTO_SHARE:.0%} of group messages: prefix-cache hit within "
                f"{TARGET_POINTS:.0f} points of text only",
                f"{self.photos.hit_rate:.1%} vs {self.text.hit_rate:.1%} "
                f"({self.points:+.1f} points)",
                abs(self.points) <= TARGET_POINTS,
            )
        ]

    @property
    def markdown(self) -> str:
        rows = [
            "| run | model calls | images sent | tokens per image | input p50 | input p90 "
            "| cache hit | prefix breaks | input cost | input cost per image sent |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, found, sent, per, extra in (
            ("text only", self.text, 0, "–", "–"),
            (
                f"photos on {self.photo_messages} of {self.messages} messages",
                self.photos,
                self.images_sent,
                f"{self.tokens_per_image:,.0f}",
                f"${self.cost_per_image:.6f}",
            ),
        ):
            rows.append(
                f"| {name} | {found.calls} | {sent} | {per} | {found.p50:,} | {found.p90:,} "
                f"| {found.hit_rate:.1%} | {found.prefix_breaks} | ${found.input_cost:.4f} "
                f"| {extra} |"
            )
        return "\n".join(rows)


async def _measure(workload: Workload) -> ImagesResult:
    photos = photos_of(workload.seed)
    files = BenchFiles()
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-images-") as tmp:
        text, requests = await economy.run_ours(workload, Path(tmp) / "text", vision=True)
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-images-") as tmp:
        seen, _ = await economy.run_ours(
            workload, Path(tmp) / "photos", photos=photos, files=files, vision=True
        )
    tools = requests[0].tools
    tools_prefix = json.dumps(
        [economy.tool_schema(s) for s in tools], ensure_ascii=False, sort_keys=True
    )
    for variant in (text, seen):
        economy.feed_cache(variant, tools_prefix)
    images = [image for call in seen.calls for m in call.messages for image in m.images]
    return ImagesResult(
        messages=len(workload.events),
        photo_messages=sum(1 for event in workload.events if photos(event)),
        images_sent=len(images),
        image_tokens=sum(image.tokens or 0 for image in images),
        text=economy.figures(text),
        photos=economy.figures(seen),
    )


def run(size: int = 400, seed: int = 43) -> ImagesResult:
    return asyncio.run(_measure(generate(size, seed)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--seed", type=int, default=43)
    args = parser.parse_args()
    result = run(args.messages, args.seed)
    print(result.markdown)
    for name, value, ok in result.targets():
        print(f"{name}: {value} {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
