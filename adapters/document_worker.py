"""A PDF's text read in a child process under CPU, memory and time limits.

A 51 KB PDF whose page inflates to 20 MB of drawing operators can hold pypdf for minutes;
in a thread it ran on after the tool's timeout and every ask parsed it again. Here a PDF is
parsed by `python -m adapters.document_worker` (the request on stdin: one JSON line, then
the file's bytes; the answer on stdout: one JSON line), whose CPU time and address space
`resource.setrlimit` bounds, and which the parent kills at its wall-clock deadline.
`DocumentReader` runs it, keeps the text of each file read (per page asked and room), and
refuses a file whose parse ran out of time for `REFUSE_SECONDS` without parsing it again.
Text-like files are decoded in the process (cheap and bounded by their size).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import OrderedDict
from dataclasses import asdict
from typing import Any

from adapters.documents import extract_text
from bot.errors import MediaRefused
from bot.ports import DocumentText

PARSE_SECONDS = 20.0
"""A PDF's parse may take this long (wall clock; the child's CPU limit is the same)."""
MEMORY_BYTES = 1024 * 1024 * 1024
"""The child's address space: a PDF that needs more is refused."""
REFUSE_SECONDS = 600.0
"""A file whose parse ran out of time is refused this long, without parsing it again."""
KEPT_TEXTS = 64
"""Documents' texts kept (by file, page and room): an ask again reads no PDF."""


def is_pdf(data: bytes) -> bool:
    return data.lstrip()[:5] == b"%PDF-"


class DocumentReader:
    """A document's text: PDFs in a bounded child process, the rest in this one."""

    def __init__(self, *, parse_seconds: float = PARSE_SECONDS) -> None:
        self.parse_seconds = parse_seconds
        self._texts: OrderedDict[tuple[str, int | None, int], DocumentText] = OrderedDict()
        self._refused: dict[str, float] = {}
        """File key → when its refusal (a parse out of time) ends (monotonic)."""
        self.parses = 0
        """PDF parses started (a test reads that a second ask parsed nothing)."""

    async def text(
        self,
        key: str,
        data: bytes,
        *,
        name: str,
        mime_type: str,
        page: int | None,
        max_chars: int,
    ) -> DocumentText:
        """The text of file `key` (its stable id), as `adapters.documents.extract_text`
        reads it, or `MediaRefused`."""
        until = self._refused.get(key)
        if until is not None:
            if time.monotonic() < until:
                raise MediaRefused("the file took too long to read before; not read again yet")
            del self._refused[key]
        cached = (key, page, max_chars)
        if (found := self._texts.get(cached)) is not None:
            self._texts.move_to_end(cached)
            return found
        if not is_pdf(data):
            text = await asyncio.to_thread(
                extract_text, data, name=name, mime_type=mime_type, page=page, max_chars=max_chars
            )
        else:
            text = await self._parse(key, data, name, mime_type, page, max_chars)
        self._texts[cached] = text
        while len(self._texts) > KEPT_TEXTS:
            self._texts.popitem(last=False)
        return text

    async def _parse(
        self, key: str, data: bytes, name: str, mime_type: str, page: int | None, max_chars: int
    ) -> DocumentText:
        self.parses += 1
        limit = max(1, int(self.parse_seconds))
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "adapters.document_worker",
            str(limit),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        request = {"name": name, "mime_type": mime_type, "page": page, "max_chars": max_chars}
        try:
            async with asyncio.timeout(self.parse_seconds):
                out, _ = await child.communicate(json.dumps(request).encode() + b"\n" + data)
        except TimeoutError:
            child.kill()
            await child.wait()
            self._refused[key] = time.monotonic() + REFUSE_SECONDS
            raise MediaRefused(
                f"the file took longer than {self.parse_seconds:g} s to read"
            ) from None
        return _answer(out, child.returncode, key, self._refused)


def _answer(out: bytes, code: int | None, key: str, refused: dict[str, float]) -> DocumentText:
    try:
        answer = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        answer = None
    if not isinstance(answer, dict):  # killed by its CPU or memory limit
        refused[key] = time.monotonic() + REFUSE_SECONDS
        raise MediaRefused(f"the file could not be read within the limits (exit {code})")
    if "refused" in answer:
        raise MediaRefused(str(answer["refused"]))
    return DocumentText(
        kind=answer["kind"],
        pages=tuple(answer["pages"]),
        first_page=int(answer["first_page"]),
        page_count=answer["page_count"],
    )


def main() -> None:
    """The child: limits first, then one request from stdin, one answer on stdout."""
    import resource

    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else int(PARSE_SECONDS)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    raw = sys.stdin.buffer.read()
    header, _, data = raw.partition(b"\n")
    request: dict[str, Any] = json.loads(header)
    try:
        text = extract_text(
            data,
            name=str(request["name"]),
            mime_type=str(request["mime_type"]),
            page=request["page"],
            max_chars=int(request["max_chars"]),
        )
        answer: dict[str, Any] = asdict(text)
    except MediaRefused as refused:
        answer = {"refused": refused.reason}
    except MemoryError:
        answer = {"refused": "the file needs more memory to read than it may use"}
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))


if __name__ == "__main__":
    main()
