"""Small real files for the document tests: PDFs written by hand (a text layer per page, a
scan without one, a bomb whose one stream inflates past pypdf's limit) and a zip."""

from __future__ import annotations

import io
import zipfile
import zlib

from PIL import Image


def pdf(pages: list[bytes]) -> bytes:
    """A PDF whose page i draws content stream `pages[i]` (Helvetica as F1), with a correct
    cross-reference table."""
    count = len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * i} 0 R".encode() for i in range(count))
        + f"] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, content in enumerate(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * i} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(stream(content))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def stream(content: bytes, *, deflate: bool = False) -> bytes:
    data = zlib.compress(content, 9) if deflate else content
    extra = b" /Filter /FlateDecode" if deflate else b""
    return (
        b"<< /Length " + str(len(data)).encode() + extra + b" >>\nstream\n" + data + b"\nendstream"
    )


def text_page(line: str) -> bytes:
    return f"BT /F1 12 Tf 72 720 Td ({line}) Tj ET".encode()


def text_pdf(lines: list[str]) -> bytes:
    return pdf([text_page(line) for line in lines])


def scanned_pdf() -> bytes:
    """A PDF of one image page and no text layer, as a scanner writes it."""
    out = io.BytesIO()
    Image.new("RGB", (200, 280), (250, 250, 250)).save(out, format="PDF")
    return out.getvalue()


def pdf_bomb() -> bytes:
    """One page whose content stream inflates to 100 MB of spaces (about 100 KB on disk),
    past pypdf's 75 MB output limit."""
    bomb = pdf([b""])
    inflated = b" " * (100 * 1024 * 1024)
    body = stream(inflated, deflate=True)
    return bomb.replace(b"<< /Length 0 >>\nstream\n\nendstream", body)


def zip_bomb_like() -> bytes:
    """A zip of 50 MB of zeros: refused by type, never opened."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.bin", b"\0" * (50 * 1024 * 1024))
    return out.getvalue()


def slow_pdf() -> bytes:
    """One page whose content stream inflates to about 20 MB of drawing and text operators
    (some 50 KB on disk): under pypdf's output limit, but minutes of parsing."""
    slow = pdf([b""])
    operators = b"BT /F1 9 Tf 72 720 Td (x) Tj ET 0 0 m 1 1 l S\n" * 440_000
    body = stream(operators, deflate=True)
    return slow.replace(b"<< /Length 0 >>\nstream\n\nendstream", body)
