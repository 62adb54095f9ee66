"""A member's document as text: text-like files decoded, PDFs through their text layer
(pypdf), page by page (docs/architecture.md, Images, documents and voice).

What is read: a PDF (by its `%PDF-` signature, whatever the name says) and text-like files
(by extension or MIME type: txt, md, csv, json, logs, code…). Everything else (archives,
office files, binaries) is refused by type, so a zip bomb is never opened. A PDF's streams
decompress under pypdf's own output limits (a PDF bomb stops there, `LimitReachedError`), and
pages are read only until the text fills the result's room. A PDF without a text layer (a
scan) is refused with that reason.
"""

from __future__ import annotations

import io
import logging
from pathlib import PurePosixPath

from bot.errors import MediaRefused
from bot.ports import DocumentText

log = logging.getLogger("tgbot.media")

TEXT_EXTENSIONS = frozenset(
    {"txt", "text", "md", "markdown", "rst", "csv", "tsv", "json", "jsonl", "ndjson", "log",
     "yaml", "yml", "toml", "ini", "cfg", "conf", "env", "xml", "html", "htm", "css", "js",
     "mjs", "ts", "tsx", "jsx", "py", "pyi", "rb", "go", "rs", "java", "kt", "kts", "swift",
     "c", "h", "cc", "cpp", "hpp", "cs", "php", "sh", "bash", "zsh", "fish", "ps1", "sql", "r",
     "lua", "pl", "scala", "dart", "vue", "svelte", "srt", "vtt", "tex", "bib", "diff", "patch",
     "gradle", "properties", "dockerfile", "makefile"}
)  # fmt: skip
TEXT_MIME_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-sh",
        "application/javascript",
        "application/sql",
        "application/x-ndjson",
    }
)
_SNIFF_BYTES = 8192
TEXT_ENCODINGS = ("utf-8-sig", "gb18030")
"""Tried in order; gb18030 reads the GBK/GB2312 files many Chinese tools still write."""


def is_text_like(name: str, mime_type: str) -> bool:
    path = PurePosixPath(name.lower())
    suffix = path.suffix.lstrip(".")
    if suffix in TEXT_EXTENSIONS or (not suffix and path.name in TEXT_EXTENSIONS):
        return True
    mime = mime_type.lower()
    return mime.startswith("text/") or mime in TEXT_MIME_TYPES


def extract_text(
    data: bytes, *, name: str, mime_type: str, page: int | None, max_chars: int
) -> DocumentText:
    """The text of `data`: a PDF from `page` (or from its first page) for as many pages as
    fit `max_chars`; a text file whole (the caller cuts it)."""
    if data.startswith(b"%PDF-"):
        return _pdf_text(data, page=page, max_chars=max_chars)
    if page is not None:
        raise MediaRefused("only a PDF has pages; call read_document without page")
    if not is_text_like(name, mime_type):
        shown = name or mime_type or "this file"
        raise MediaRefused(
            f"{shown}: not a type read_document reads (text files such as txt, md, csv, json, "
            "code and logs, and PDFs)"
        )
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise MediaRefused(f"{name or 'the file'} is binary, not text")
    for encoding in TEXT_ENCODINGS:
        try:
            return DocumentText(kind="text", pages=(data.decode(encoding),))
        except UnicodeDecodeError:
            continue
    return DocumentText(kind="text", pages=(data.decode("utf-8", errors="replace"),))


def _pdf_text(data: bytes, *, page: int | None, max_chars: int) -> DocumentText:
    from pypdf import PdfReader  # imported when a PDF is read: most turns never need it
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise MediaRefused("the PDF is password-protected")
        count = len(reader.pages)
        if count == 0:
            raise MediaRefused("the PDF has no pages")
        start = page or 1
        if not 1 <= start <= count:
            raise MediaRefused(f"page {start} does not exist: the PDF has {count} pages")
        pages: list[str] = []
        room = max_chars
        for number in range(start, count + 1 if page is None else start + 1):
            text = reader.pages[number - 1].extract_text() or ""
            pages.append(text)
            room -= len(text)
            if room <= 0:
                break
    except MediaRefused:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        log.info("a PDF was not read: %s", type(exc).__name__)
        raise MediaRefused(
            f"the PDF could not be read ({type(exc).__name__}: damaged, or a decompression bomb)"
        ) from None
    if not any(text.strip() for text in pages):
        raise MediaRefused(
            "the PDF has no text layer (a scan?): read_document reads text only"
            if page is None
            else f"page {start} has no text (a scanned page?)"
        )
    return DocumentText(kind="pdf", pages=tuple(pages), first_page=start, page_count=count)
