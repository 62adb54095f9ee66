"""Issue 50, item 4: a document costs bounded work.

Files served by the fake Bot API, read through the media cache as `read_document` reads
them: a PDF whose page inflates to 20 MB of operators is cut at its parse deadline (the
child process killed, never running on) and refused for a while without parsing again; a
document read once is not parsed again when asked again.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adapters.document_worker import DocumentReader
from adapters.media_files import CachedMediaFiles, MediaCache, TelegramFileSource
from bot.domain.facts import Media
from bot.errors import MediaRefused
from testkit.fake_bot_api import FakeBotApi
from tests.documents import slow_pdf, text_pdf

pytestmark = pytest.mark.slow

TOKEN = "123:documents"
DEADLINE = 1.0


def files_of(api: FakeBotApi, tmp_path: Path, reader: DocumentReader) -> CachedMediaFiles:
    return CachedMediaFiles(
        TelegramFileSource(api.base_url, TOKEN),
        MediaCache(tmp_path / "media", keep_days=7, max_bytes=10**8),
        max_file_bytes=20 * 1024 * 1024,
        timeout_seconds=10.0,
        documents=reader,
    )


async def test_a_pdf_that_parses_too_long_is_cut_and_refused_for_a_while(
    tmp_path: Path,
) -> None:
    data = slow_pdf()
    assert len(data) < 200_000
    reader = DocumentReader(parse_seconds=DEADLINE)
    async with FakeBotApi(TOKEN) as api:
        files = files_of(api, tmp_path, reader)
        api.add_file("SLOW", data, unique_id="U-slow")
        media = Media(kind="document", file_id="SLOW", file_unique_id="U-slow",
                      file_name="report.pdf", mime_type="application/pdf")  # fmt: skip
        try:
            started = time.monotonic()
            with pytest.raises(MediaRefused, match="took longer than 1 s"):
                await files.text(media, page=None, max_chars=4000)
            assert time.monotonic() - started < 30  # cut at its deadline, not run to its end
            with pytest.raises(MediaRefused, match="not read again yet"):
                await files.text(media, page=None, max_chars=4000)
            assert reader.parses == 1
        finally:
            await files.aclose()


async def test_a_document_read_once_is_not_parsed_again(tmp_path: Path) -> None:
    reader = DocumentReader()
    async with FakeBotApi(TOKEN) as api:
        files = files_of(api, tmp_path, reader)
        api.add_file("PDF", text_pdf(["Q3 revenue 4.2M"]), unique_id="U-pdf")
        media = Media(kind="document", file_id="PDF", file_unique_id="U-pdf",
                      file_name="q3.pdf", mime_type="application/pdf")  # fmt: skip
        try:
            first = await files.text(media, page=None, max_chars=4000)
            again = await files.text(media, page=None, max_chars=4000)
        finally:
            await files.aclose()
    assert first.pages == ("Q3 revenue 4.2M",)
    assert again == first
    assert reader.parses == 1
