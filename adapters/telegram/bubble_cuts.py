"""Where a rendered reply too long for one Telegram bubble is cut (`best_cut`): a code block
that fits a bubble moves to the next one whole; else between top-level blocks, then at a
paragraph, a line, a sentence or a word, never inside a grapheme; and where in the Markdown
source the next bubble starts (`source_at`)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import Protocol

from adapters.telegram.graphemes import safe_cut
from adapters.telegram.text_units import utf16_len


class Anchor(Protocol):
    """Rendered characters `rendered`..`rendered + length` came from `source`.. in the
    Markdown (length 0: a block or line that starts there)."""

    @property
    def rendered(self) -> int: ...

    @property
    def source(self) -> int: ...

    @property
    def length(self) -> int: ...


class Span(Protocol):
    """A code block of the rendered text, characters `start`..`end`."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


# Where a bubble may end inside a block, best first; each pattern matches the separator.
_BOUNDARIES: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n[ \t]*\n"),  # paragraph
    re.compile(r"\n"),  # line (inside a code block the next line keeps its indentation)
    re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；])\s*"),  # sentence
    re.compile(r"[ \t\u3000]+"),  # word
)


def inside(pres: Sequence[Span], index: int) -> Span | None:
    """The code block (`pre` span) that `index` falls strictly inside, if any."""
    return next((p for p in pres if p.start < index < p.end), None)


def best_cut(
    text: str,
    start: int,
    fit: int,
    limit: int,
    block_starts: Sequence[int],
    pres: Sequence[Span],
) -> tuple[int, int]:
    """(end of this bubble, start of the next) for the span `start`..`fit`."""
    # A code block that crosses the span's end but fits in a bubble of its own moves to
    # the next bubble whole, even if this one ends up short.
    crossing = inside(pres, fit)
    if (
        crossing is not None
        and crossing.start > start
        and utf16_len(text[crossing.start : crossing.end]) <= limit
    ):
        return crossing.start, crossing.start
    floor = start + (fit - start) // 2
    # Between top-level blocks first (lists and quotes stay whole when they can).
    blocks = [b for b in block_starts if floor <= b <= fit and b > start]
    if blocks:
        cut = blocks[-1]
        return cut, cut
    for rank, pattern in enumerate(_BOUNDARIES):
        best: tuple[int, int] | None = None
        for match in pattern.finditer(text, floor, fit + 1):
            at = match.start()
            if at <= start or at > fit:
                continue
            if rank != 1 and inside(pres, at) is not None:
                continue  # only whole lines of code are cut
            best = (at, match.end())
        if best is not None:
            return best
    cut = start + safe_cut(text[start:], fit - start)
    return cut, cut


def prefix_fitting(text: str, limit: int) -> int:
    """The largest character index whose prefix is at most `limit` UTF-16 units long."""
    units = 0
    for index, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return index
    return len(text)


def source_at(anchors: Sequence[Anchor], source_length: int, resume: int, index: int) -> int:
    """The source position a bubble starting at rendered `index` came from (`resume`..`index`
    is the whitespace skipped before it, where a block or list item may be anchored)."""
    if not anchors:
        return source_length
    keys = [a.rendered for a in anchors]
    at = bisect.bisect_left(keys, min(resume, index))
    if at < len(anchors) and anchors[at].rendered <= index:
        return anchors[at].source  # the first anchor there: a block's line start
    before = anchors[at - 1] if at > 0 else None
    if before is not None and before.rendered < index < before.rendered + before.length:
        return before.source + (index - before.rendered)
    if at < len(anchors):
        return anchors[at].source
    return source_length
