"""Documents as text: text-like files decoded, PDFs page by page, everything else refused
with a reason the model reads (scans, archives, binaries, PDF bombs)."""

from __future__ import annotations

import pytest

from adapters.documents import extract_text
from bot.errors import MediaRefused
from tests.documents import pdf_bomb, scanned_pdf, text_pdf, zip_bomb_like


def read(data: bytes, name: str, mime: str = "", page: int | None = None, room: int = 10_000):
    return extract_text(data, name=name, mime_type=mime, page=page, max_chars=room)


@pytest.mark.parametrize(
    ("data", "name", "mime", "text"),
    [
        (b"name,amount\nalice,3\n", "sales.csv", "text/csv", "name,amount\nalice,3\n"),
        ('{"a": "é"}'.encode(), "x.json", "", '{"a": "é"}'),
        ("会议纪要：下周一发布".encode("gb18030"), "notes.txt", "", "会议纪要：下周一发布"),
        (b"\xef\xbb\xbfERROR boot", "app.log", "", "ERROR boot"),
        (b"print(1)\n", "Makefile.py", "", "print(1)\n"),
        (b"# Title\n", "README", "text/markdown", "# Title\n"),
    ],
    ids=["csv", "json", "gbk-text", "bom-log", "code", "mime-only"],
)
def test_text_like_files_are_read_whole(data: bytes, name: str, mime: str, text: str) -> None:
    read_back = read(data, name, mime)
    assert read_back.kind == "text"
    assert read_back.pages == (text,)


def test_a_pdf_is_read_page_by_page() -> None:
    data = text_pdf(["Revenue rose 12 percent", "Costs fell", "Outlook is stable"])
    whole = read(data, "report.pdf", "application/pdf")
    assert (whole.kind, whole.page_count, whole.first_page) == ("pdf", 3, 1)
    assert whole.pages == ("Revenue rose 12 percent", "Costs fell", "Outlook is stable")
    second = read(data, "report.pdf", page=2)
    assert (second.pages, second.first_page) == (("Costs fell",), 2)
    first_only = read(data, "report.pdf", room=10)  # the first page fills the room
    assert first_only.pages == ("Revenue rose 12 percent",)


def test_a_pdf_is_known_by_its_signature_not_its_name() -> None:
    assert read(text_pdf(["hidden"]), "notes.txt").kind == "pdf"


@pytest.mark.parametrize(
    ("data", "name", "page", "reason"),
    [
        (scanned_pdf(), "scan.pdf", None, "no text layer (a scan?)"),
        (text_pdf(["one"]), "a.pdf", 5, "page 5 does not exist: the PDF has 1 pages"),
        (zip_bomb_like(), "archive.zip", None, "archive.zip: not a type read_document reads"),
        (b"\x7fELF\x00\x00binary", "tool.log", None, "is binary, not text"),
        (b"plain", "a.txt", 2, "only a PDF has pages"),
        (b"%PDF-1.4\ngarbage", "broken.pdf", None, "the PDF could not be read"),
    ],
    ids=["scanned", "no-such-page", "zip", "binary", "page-of-text", "damaged-pdf"],
)
def test_what_cannot_be_read_is_refused_with_a_reason(
    data: bytes, name: str, page: int | None, reason: str
) -> None:
    with pytest.raises(MediaRefused) as refused:
        read(data, name, page=page)
    assert reason in refused.value.reason


def test_a_pdf_bomb_stops_at_the_decompression_limit() -> None:
    with pytest.raises(MediaRefused, match="decompression bomb"):
        read(pdf_bomb(), "bomb.pdf")
