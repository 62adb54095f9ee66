"""Members' files: fetched from the Bot API, kept in a bounded cache, images verified and
downscaled with Pillow (docs/architecture.md, Images, documents and voice).

- `TelegramFileSource`: `getFile`, then the file URL `{api base}/file/bot<token>/<file_path>`
  (the base follows `TELEGRAM_API_BASE`, so a local Bot API server or the fake serves it),
  streamed and cut off past the size limit.
- `MediaCache`: `DATA_DIR/media/`, one file per `file_unique_id` (mode 0600), files older
  than `keep_days` removed, and the oldest removed first past `max_mb`.
- `CachedMediaFiles` (the `MediaFiles` port): each download under a deadline, one download
  per file however many ask at once; `prepare_image` decodes in a worker thread.

Every failure is a `MediaRefused` whose reason the model reads; the bot token never appears
in one.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import re
import time
import warnings
from pathlib import Path

import httpx

from adapters.document_worker import DocumentReader
from bot.context.images import MAX_SOURCE_PIXELS, ImageBounds, fitted_size
from bot.domain.facts import Media
from bot.errors import MediaRefused
from bot.ports import DocumentText, FetchedImage

log = logging.getLogger("tgbot.media")

_SAFE_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
_IMAGE_FORMATS = frozenset({"JPEG", "PNG", "WEBP", "GIF"})
JPEG_QUALITY = 85
_CHUNK = 64 * 1024


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def plain_file_path(path: str) -> bool:
    """Whether `getFile`'s `file_path` is a plain relative path (`photos/file_3.jpg`): no
    `..` segment, query, fragment, percent-encoding (`%2e%2e`), backslash or control
    character, so the download URL names the file and nothing beside it."""
    if any(c in path for c in "?#%\\") or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return False
    return all(segment not in (".", "..") for segment in path.strip("/").split("/"))


class TelegramFileSource:
    """Where files come from: `getFile` and the file download of one bot, over its own HTTP
    client (tests point it at the fake Bot API)."""

    def __init__(
        self, api_base: str, token: str, *, client: httpx.AsyncClient | None = None
    ) -> None:
        self._base = api_base.rstrip("/")
        self._token = token
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(10.0))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, file_id: str, *, max_bytes: int) -> bytes:
        try:
            response = await self._client.post(
                f"{self._base}/bot{self._token}/getFile", data={"file_id": file_id}
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            reason = f"Telegram could not be asked for the file ({type(exc).__name__})"
            raise MediaRefused(reason) from None
        if not isinstance(body, dict) or not body.get("ok"):
            said = body.get("description", "") if isinstance(body, dict) else ""
            raise MediaRefused(f"Telegram refused the file: {str(said)[:120]}")
        result = body.get("result") or {}
        size = result.get("file_size")
        if isinstance(size, int) and size > max_bytes:
            raise MediaRefused(
                f"the file is {_megabytes(size)}, over the {_megabytes(max_bytes)} limit"
            )
        path = result.get("file_path")
        if not isinstance(path, str) or not path:
            raise MediaRefused("Telegram gave no download path for the file (over 20 MB?)")
        if not plain_file_path(path):
            raise MediaRefused("Telegram gave a download path that is not a plain file path")
        return await self._download(path, max_bytes)

    async def _download(self, path: str, max_bytes: int) -> bytes:
        url = f"{self._base}/file/bot{self._token}/{path.lstrip('/')}"
        chunks: list[bytes] = []
        total = 0
        try:
            async with self._client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise MediaRefused(f"the download failed (HTTP {response.status_code})")
                async for chunk in response.aiter_bytes(_CHUNK):
                    total += len(chunk)
                    if total > max_bytes:
                        raise MediaRefused(f"the file is over the {_megabytes(max_bytes)} limit")
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise MediaRefused(f"the download failed ({type(exc).__name__})") from None
        return b"".join(chunks)


class MediaCache:
    """Files by key in one directory, bounded by age and total size."""

    def __init__(self, directory: Path, *, keep_days: int, max_bytes: int) -> None:
        self.directory = directory
        self.keep_seconds = keep_days * 86400
        self.max_bytes = max_bytes

    def path(self, key: str) -> Path:
        return self.directory / key

    def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except OSError:
            return None

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` (0600, written whole or not at all), then prune."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        final = self.path(key)
        temporary = final.with_name(f".{key}.{os.getpid()}.part")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, final)
        except OSError:
            temporary.unlink(missing_ok=True)
            raise
        self.prune()

    def prune(self, now: float | None = None) -> None:
        """Remove files past the age bound, then the oldest until the total fits."""
        now = time.time() if now is None else now
        entries: list[tuple[float, int, Path]] = []
        try:
            listing = list(self.directory.iterdir())
        except OSError:
            return
        for path in listing:
            try:
                stat = path.stat()
            except OSError:
                continue
            if self.keep_seconds and now - stat.st_mtime > self.keep_seconds:
                path.unlink(missing_ok=True)
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size


def cache_key(media: Media) -> str:
    """The cache's name for a file: its `file_unique_id` (the same file for every bot and
    chat), or a digest of the file id when there is none or it is not a plain name."""
    unique = media.file_unique_id
    if unique and _SAFE_KEY.fullmatch(unique):
        return unique
    return "f" + hashlib.sha256((media.file_id or "").encode()).hexdigest()[:40]


class CachedMediaFiles:
    """The `MediaFiles` port: files through the cache, each download under a deadline."""

    def __init__(
        self,
        source: TelegramFileSource,
        cache: MediaCache,
        *,
        max_file_bytes: int,
        timeout_seconds: float,
        documents: DocumentReader | None = None,
    ) -> None:
        self.documents = documents or DocumentReader()
        """Documents' texts: PDFs parsed in a bounded child process, texts kept per file."""
        self.source = source
        self.cache = cache
        self.max_file_bytes = max_file_bytes
        self.timeout_seconds = timeout_seconds
        self._inflight: dict[str, asyncio.Future[bytes]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Close the source's HTTP client."""
        await self.source.aclose()

    async def image(self, media: Media, bounds: ImageBounds) -> FetchedImage:
        raw = await self.raw(media)
        return await asyncio.to_thread(prepare_image, raw, bounds)

    async def file(self, media: Media) -> bytes:
        return await self.raw(media)

    async def prepare(self, raw: bytes, bounds: ImageBounds) -> FetchedImage:
        return await asyncio.to_thread(prepare_image, raw, bounds)

    async def text(self, media: Media, *, page: int | None, max_chars: int) -> DocumentText:
        raw = await self.raw(media)
        return await self.documents.text(
            media.file_unique_id or media.file_id or "",
            raw,
            name=media.file_name or "",
            mime_type=media.mime_type or "",
            page=page,
            max_chars=max_chars,
        )

    async def raw(self, media: Media) -> bytes:
        """The file's bytes: from the cache, or downloaded once (a concurrent ask for the same
        file waits for that download)."""
        if media.file_id is None:
            raise MediaRefused("the message has no file")
        if media.file_size is not None and media.file_size > self.max_file_bytes:
            raise MediaRefused(
                f"the file is {_megabytes(media.file_size)}, over the "
                f"{_megabytes(self.max_file_bytes)} limit"
            )
        key = cache_key(media)
        cached = await asyncio.to_thread(self.cache.get, key)
        if cached is not None:
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            data = await self._download(media.file_id)
            await asyncio.to_thread(self.cache.put, key, data)
        except BaseException as exc:
            shared = exc if isinstance(exc, MediaRefused) else MediaRefused("the download failed")
            future.set_exception(shared)
            future.exception()  # marked retrieved: nobody else may be waiting
            raise
        else:
            future.set_result(data)
            return data
        finally:
            del self._inflight[key]

    async def _download(self, file_id: str) -> bytes:
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await self.source.fetch(file_id, max_bytes=self.max_file_bytes)
        except TimeoutError:
            raise MediaRefused(
                f"the download did not finish within {self.timeout_seconds:g} s"
            ) from None

    def prefetch(self, media: Media) -> None:
        """Start fetching `media` into the cache now (off any chat's lock): the turn that
        shows it then reads the cache. A failure is only logged; the turn tries again."""

        async def run() -> None:
            try:
                await self.raw(media)
            except MediaRefused as refused:
                log.info("prefetch of a file skipped: %s", refused.reason)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def prepare_image(raw: bytes, bounds: ImageBounds) -> FetchedImage:
    """`raw` decoded, checked and encoded again within `bounds`: JPEG, or PNG when it has
    transparency; the first frame of an animation. Refuses what is not one of the four image
    formats the providers take, a truncated or damaged file, and a decompression bomb (more
    than `MAX_SOURCE_PIXELS` declared), before decoding it. Pillow is loaded by the first
    image (2 MB of resident memory a bot without images does not carry)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw)) as image:
                kind = image.format or ""
                if kind not in _IMAGE_FORMATS:
                    raise MediaRefused(
                        f"the file is not an image a model reads ({kind or 'unknown format'})"
                    )
                width, height = image.size
                if width * height > MAX_SOURCE_PIXELS:
                    raise MediaRefused(
                        f"the image declares {width}x{height} pixels (a decompression bomb?)"
                    )
                target = fitted_size(width, height, bounds)
                if kind == "JPEG":
                    image.draft("RGB", target)  # decode at a reduced scale: faster, less memory
                image.load()
                alpha = image.mode in ("RGBA", "LA", "PA") or (
                    image.mode == "P" and "transparency" in image.info
                )
                frame = image.convert("RGBA" if alpha else "RGB")
    except MediaRefused:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise MediaRefused("the image is too large to decode (a decompression bomb?)") from None
    except (OSError, ValueError, SyntaxError, EOFError):
        raise MediaRefused("the file is not a readable image (truncated or damaged)") from None
    if frame.size != target:
        frame = frame.resize(target, Image.Resampling.LANCZOS)
    # nothing but pixels leaves: no EXIF, XMP or JPEG comment (`COM`), which Pillow would
    # otherwise write again from what it read
    frame.info.clear()
    out = io.BytesIO()
    if alpha:
        frame.save(out, format="PNG", optimize=True)
        media_type = "image/png"
    else:
        frame.save(out, format="JPEG", quality=JPEG_QUALITY, optimize=True)
        media_type = "image/jpeg"
    return FetchedImage(
        media_type=media_type, data=out.getvalue(), width=frame.width, height=frame.height
    )
