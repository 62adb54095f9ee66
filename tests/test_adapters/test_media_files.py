"""Members' files: hostile images refused before they are decoded, the cache bounded and
private, downloads bounded in size and time (against the fake Bot API over real HTTP)."""

from __future__ import annotations

import io
import os
import stat
import struct
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from PIL import Image

from adapters.media_files import (
    CachedMediaFiles,
    MediaCache,
    TelegramFileSource,
    cache_key,
    prepare_image,
)
from bot.context.images import ANTHROPIC_BOUNDS, OPENAI_BOUNDS
from bot.domain.facts import Media
from bot.errors import MediaRefused
from testkit.fake_bot_api import FakeBotApi

TOKEN = "123456:TEST-token"


def encoded(image: Image.Image, kind: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=kind)
    return out.getvalue()


def pixel_bomb(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares `width x height` (its data is one row)."""
    small = encoded(Image.new("L", (1, 1)), "PNG")
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    ihdr = struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return small[:8] + ihdr + small[8 + 25 :]


def test_a_photo_is_downscaled_and_encoded_again() -> None:
    raw = encoded(Image.new("RGB", (4000, 3000), (10, 20, 30)), "JPEG")
    image = prepare_image(raw, OPENAI_BOUNDS)
    assert (image.width, image.height, image.media_type) == (1024, 768, "image/jpeg")
    with Image.open(io.BytesIO(image.data)) as sent:
        assert sent.size == (1024, 768)
    claude = prepare_image(raw, ANTHROPIC_BOUNDS)
    assert claude.width * claude.height <= 1092 * 1092


def test_transparency_is_kept_as_png() -> None:
    raw = encoded(Image.new("RGBA", (512, 512), (0, 0, 0, 0)), "WEBP")
    image = prepare_image(raw, OPENAI_BOUNDS)
    assert image.media_type == "image/png"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (pixel_bomb(30000, 30000), "a decompression bomb"),
        (pixel_bomb(8000, 8000), "declares 8000x8000 pixels"),
        (encoded(Image.new("RGB", (800, 600)), "JPEG")[:400], "truncated or damaged"),
        (b"name,amount\nalice,3\n", "truncated or damaged"),  # a CSV sent as image/png
        (encoded(Image.new("RGB", (64, 64)), "BMP"), "not an image a model reads (BMP)"),
    ],
    ids=["pixel-bomb", "over-our-bound", "truncated", "wrong-mime", "bmp"],
)
def test_a_hostile_image_is_refused_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(MediaRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
        prepare_image(raw, OPENAI_BOUNDS)


def test_the_cache_is_private_and_bounded(tmp_path: Path) -> None:
    cache = MediaCache(tmp_path / "media", keep_days=7, max_bytes=250)
    now = time.time()
    cache.put("old", b"x" * 100)
    os.utime(cache.path("old"), (now - 300, now - 300))
    cache.put("mid", b"y" * 100)
    os.utime(cache.path("mid"), (now - 200, now - 200))
    cache.put("new", b"z" * 100)  # 300 bytes: the oldest goes
    assert cache.get("old") is None
    assert cache.get("mid") == b"y" * 100
    assert cache.get("new") == b"z" * 100
    assert stat.S_IMODE(cache.path("new").stat().st_mode) == 0o600
    cache.prune(now=now - 100 + 7 * 86400)  # "mid" is past 7 days then, "new" is not
    assert cache.get("mid") is None
    assert cache.get("new") == b"z" * 100


def test_a_file_unique_id_that_is_not_a_plain_name_never_becomes_a_path() -> None:
    key = cache_key(Media(kind="photo", file_id="abc", file_unique_id="../../etc/passwd"))
    assert "/" not in key
    assert key.startswith("f")


@asynccontextmanager
async def files_over(
    api: FakeBotApi, tmp_path: Path, **limits: float
) -> AsyncIterator[CachedMediaFiles]:
    source = TelegramFileSource(api.base_url, TOKEN)
    cache = MediaCache(tmp_path / "media", keep_days=7, max_bytes=10**8)
    files = CachedMediaFiles(
        source,
        cache,
        max_file_bytes=int(limits.get("max_bytes", 20 * 1024 * 1024)),
        timeout_seconds=limits.get("timeout", 10.0),
    )
    try:
        yield files
    finally:
        await files.aclose()


async def test_a_file_is_downloaded_once_then_read_from_the_cache(tmp_path: Path) -> None:
    async with FakeBotApi(TOKEN) as api, files_over(api, tmp_path) as files:
        api.add_file("F1", b"hello", unique_id="U1")
        media = Media(kind="document", file_id="F1", file_unique_id="U1")
        assert await files.file(media) == b"hello"
        assert await files.file(media) == b"hello"
        assert api.downloads == ["files/F1"]


async def test_a_file_over_the_limit_is_refused_without_downloading(tmp_path: Path) -> None:
    async with FakeBotApi(TOKEN) as api, files_over(api, tmp_path) as files:
        api.add_file("BIG", b"x" * 10, declared_size=30 * 1024 * 1024)
        with pytest.raises(MediaRefused, match=r"30\.0 MB, over the 20\.0 MB limit"):
            await files.file(Media(kind="document", file_id="BIG"))
        assert api.downloads == []


async def test_a_file_that_lies_about_its_size_is_cut_off(tmp_path: Path) -> None:
    async with FakeBotApi(TOKEN) as api, files_over(api, tmp_path, max_bytes=1024) as files:
        api.add_file("LIAR", b"x" * 200_000, declared_size=10)
        with pytest.raises(MediaRefused, match=r"over the 0\.0 MB limit"):
            await files.file(Media(kind="document", file_id="LIAR"))


async def test_a_stalled_download_ends_at_its_deadline(tmp_path: Path) -> None:
    async with FakeBotApi(TOKEN) as api, files_over(api, tmp_path, timeout=0.2) as files:
        api.add_file("SLOW", b"data")
        api.delay_next("file", 3600)
        with pytest.raises(MediaRefused, match=r"did not finish within 0\.2 s"):
            await files.file(Media(kind="document", file_id="SLOW"))


async def test_an_unknown_file_is_a_refusal_that_names_no_token(tmp_path: Path) -> None:
    async with FakeBotApi(TOKEN) as api, files_over(api, tmp_path) as files:
        with pytest.raises(MediaRefused) as refused:
            await files.file(Media(kind="document", file_id="NOPE"))
        assert "invalid file_id" in refused.value.reason
        assert TOKEN not in refused.value.reason


@pytest.mark.parametrize(
    "path",
    [
        "../bot/getMe",
        "photos/../../x.jpg",
        "photos/x.jpg?download=1",
        "photos/x.jpg#frag",
        "photos/%2e%2e/x.jpg",
        "photos/%2E%2E%2Fx.jpg",
        "photos\\..\\x.jpg",
    ],
)
async def test_a_download_path_that_is_not_a_plain_file_path_is_refused(
    tmp_path: Path, path: str
) -> None:
    """Issue 50, item 6: whatever `getFile` says, the download names one file under the
    bot's file URL, never another endpoint or a path beside it."""
    async with FakeBotApi(TOKEN) as api, files_over(api, tmp_path) as files:
        api.add_file("F1", b"hello", unique_id="U1", path=path)
        with pytest.raises(MediaRefused, match="not a plain file path"):
            await files.file(Media(kind="document", file_id="F1", file_unique_id="U1"))
        assert api.downloads == []


@pytest.mark.parametrize("size", [(64, 48), (4000, 3000)], ids=["kept_size", "downscaled"])
def test_a_jpegs_comment_never_reaches_the_model(size: tuple[int, int]) -> None:
    """Issue 50, item 6: a JPEG comment segment (`COM`, where cameras and editors put
    names, places, serial numbers) is stripped like EXIF."""
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(
        out, format="JPEG", comment=b"home: 12 Elm Street, Alice's phone"
    )
    raw = out.getvalue()
    assert b"Elm Street" in raw
    prepared = prepare_image(raw, OPENAI_BOUNDS)
    assert prepared.media_type == "image/jpeg"
    assert b"Elm Street" not in prepared.data
