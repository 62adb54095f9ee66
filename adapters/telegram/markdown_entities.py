"""The model's Markdown as Telegram sees it: plain text plus message entities, split into bubbles.

The renderer parses CommonMark (with `~~strikethrough~~`, tables as aligned monospace rows,
and Telegram's `||spoiler||`) using markdown-it-py and walks the tokens into plain text and
entity spans: no parse mode, so nothing is ever escaped. `plan_bubbles` cuts that text into
bubbles of at most `limit` UTF-16 code units, preferring block, then line, sentence and word
boundaries (`adapters.telegram.bubble_cuts`); it keeps a code block whole when it fits in a
bubble, clips every entity that crosses a cut into one entity per bubble, and gives each
bubble the slice of the Markdown source it came from (what is stored, so the history shows
the model its own words).

Entities here count characters while rendering and splitting; `Bubble.entities` are in
UTF-16 code units, as the Bot API wants them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from adapters.telegram.bubble_cuts import best_cut, inside, prefix_fitting, source_at
from adapters.telegram.markdown_tables import table_text
from adapters.telegram.text_units import utf16_len

EntityKind = Literal[
    "bold", "italic", "strikethrough", "code", "pre", "text_link", "blockquote", "spoiler"
]  # fmt: skip

TELEGRAM_TEXT_LIMIT = 4096
_BULLET = "•"
_RULE = "———"
# Schemes Telegram accepts in a text_link; anything else stays plain text (a relative link
# or `javascript:` would make Telegram reject the whole message).
_LINK_SCHEMES = re.compile(r"^(https?|tg|mailto|ftp)://|^mailto:|^tg:", re.IGNORECASE)
# How far ahead of the cursor a rendered piece is looked for in the source, whole or (when
# escapes changed it) character by character.
_FIND_SLACK = 1000
_ESCAPE_SLACK = 10
_SPOILER = "||"


@dataclass(frozen=True, slots=True, kw_only=True)
class Entity:
    """A Telegram message entity; `offset`/`length` in UTF-16 code units."""

    type: EntityKind
    offset: int
    length: int
    url: str = ""
    language: str = ""

    def to_api(self) -> dict[str, Any]:
        """The Bot API `MessageEntity` JSON."""
        data: dict[str, Any] = {"type": self.type, "offset": self.offset, "length": self.length}
        if self.url:
            data["url"] = self.url
        if self.language:
            data["language"] = self.language
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class Bubble:
    """One Telegram message: what is shown (`text` + `entities`) and the Markdown behind it."""

    source: str
    text: str
    entities: tuple[Entity, ...]


@dataclass(frozen=True, slots=True)
class _Span:
    """An entity over characters `start`..`end` of the rendered text."""

    kind: EntityKind
    start: int
    end: int
    url: str = ""
    language: str = ""


@dataclass(frozen=True, slots=True)
class _Anchor:
    """_Rendered characters `rendered`.. `rendered + length` came from `source`.. in the
    Markdown (length 0: a block or line that starts there)."""

    rendered: int
    source: int
    length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rendered:
    """The rendered text, its entity spans (characters), where top-level blocks start,
    and anchors back into the Markdown source."""

    source: str
    text: str
    spans: tuple[_Span, ...]
    block_starts: tuple[int, ...]
    anchors: tuple[_Anchor, ...]


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["strikethrough", "table"])


_MD = _parser()


class _Renderer:
    """Walks markdown-it tokens, appending plain text and recording spans and anchors."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.parts: list[str] = []
        self.size = 0
        self.spans: list[_Span] = []
        self.anchors: list[_Anchor] = []
        self.block_starts: list[int] = []
        self.cursor = 0
        self.line_starts = [0, *(m.end() for m in re.finditer("\n", source))]
        self.lists: list[list[int]] = []  # per open list: [next number] or [] for bullets
        self.quote_depth = 0
        self.spoilers_left = 0
        self.spoiler_start: int | None = None
        self.fresh = True  # nothing written since the last block prefix

    # --------------------------------------------------------------- output

    def write(self, text: str, *, find: bool = True) -> None:
        if not text:
            return
        if find:
            self._anchor_text(text)
        self.parts.append(text)
        self.size += len(text)
        self.fresh = False

    def _anchor_text(self, text: str) -> None:
        limit = min(len(self.source), self.cursor + len(text) + _FIND_SLACK)
        found = self.source.find(text, self.cursor, limit)
        if found >= 0:
            self.anchors.append(_Anchor(self.size, found, len(text)))
            self.cursor = found + len(text)
            return
        # Escapes and character references (`\*`, `&amp;`) change the text: follow it
        # character by character, a few source characters at most between two.
        for index, ch in enumerate(text):
            near = self.source.find(ch, self.cursor, self.cursor + _ESCAPE_SLACK)
            if near >= 0:
                self.anchors.append(_Anchor(self.size + index, near, 1))
                self.cursor = near + 1

    def skip_link_target(self) -> None:
        """Move the cursor past a link's `](target)` so its URL is not taken for text."""
        if self.source.startswith("](", self.cursor):
            close = self.source.find(")", self.cursor)
            if close >= 0:
                self.cursor = close + 1

    def start_block(self, token: Token) -> None:
        """Separate a new block from what came before, and anchor it to its source line."""
        if not self.fresh and self.size:
            self.parts.append("\n" if self.lists else "\n\n")
            self.size += 1 if self.lists else 2
            self.fresh = True
        if token.level == 0:
            self.block_starts.append(self.size)
        if token.map:
            line_start = self.line_starts[min(token.map[0], len(self.line_starts) - 1)]
            if line_start >= self.cursor or not self.anchors:
                self.anchors.append(_Anchor(self.size, line_start, 0))
                self.cursor = max(self.cursor, line_start)

    def span(self, kind: EntityKind, start: int, *, url: str = "", language: str = "") -> None:
        if self.size > start:
            self.spans.append(_Span(kind, start, self.size, url, language))

    # --------------------------------------------------------------- blocks

    def blocks(self, tokens: Sequence[Token]) -> None:
        opened: list[tuple[str, int]] = []  # (token type, where its content began)
        table: list[list[str]] | None = None  # the rows of the table being read
        for token in tokens:
            if table is not None:
                table = self._table_token(table, token)
            elif token.type == "table_open":
                self.start_block(token)
                table = []
            else:
                self._block_token(token, opened)

    def _table_token(self, table: list[list[str]], token: Token) -> list[list[str]] | None:
        """A token inside a table: its rows and cells, written as preformatted text at
        `table_close` (None: the table ended)."""
        if token.type == "tr_open":
            table.append([])
        elif token.type == "inline" and table:
            table[-1].append(_plain(token.children or []))
        elif token.type == "table_close":
            start = self.size
            self.write(table_text(table), find=False)
            self.span("pre", start)
            return None
        return table

    def _block_token(self, token: Token, opened: list[tuple[str, int]]) -> None:
        match token.type:
            case "heading_open" | "blockquote_open":
                self.start_block(token)
                opened.append((token.type, self.size))
                if token.type == "blockquote_open":
                    self.quote_depth += 1
                    self.fresh = True
            case "heading_close":
                _, start = opened.pop()
                self.span("bold", start)
            case "blockquote_close":
                _, start = opened.pop()
                self.quote_depth -= 1
                if self.quote_depth == 0:  # Telegram does not nest blockquotes
                    self.span("blockquote", start)
            case "paragraph_open":
                if not token.hidden:
                    self.start_block(token)
            case "bullet_list_open" | "ordered_list_open":
                self._open_list(token)
            case "bullet_list_close" | "ordered_list_close":
                self.lists.pop()
            case "list_item_open":
                self._list_item(token)
            case "inline":
                self.inline(token.children or [])
            case "fence" | "code_block":
                self.start_block(token)
                start = self.size
                self._code_lines(token)
                language = token.info.split()[0] if token.info.strip() else ""
                self.span("pre", start, language=language)
            case "hr":
                self.start_block(token)
                self.write(_RULE, find=False)
            case "html_block":
                self.start_block(token)
                self.write(token.content.rstrip("\n"))
            case _:
                pass

    def _open_list(self, token: Token) -> None:
        if not self.lists:  # a nested list continues its item's block
            self.start_block(token)
        first = int(token.attrs.get("start", 1) or 1)
        self.lists.append([first] if token.type == "ordered_list_open" else [])

    def _list_item(self, token: Token) -> None:
        self.start_block(token)
        numbering = self.lists[-1]
        if numbering:
            marker = f"{numbering[0]}{token.markup or '.'}"
            numbering[0] += 1
        else:
            marker = _BULLET
        self.write("   " * (len(self.lists) - 1) + marker + " ", find=False)
        self.fresh = True

    def _code_lines(self, token: Token) -> None:
        lines = token.content.rstrip("\n").split("\n")
        for index, line in enumerate(lines):
            if index:
                self.write("\n", find=False)
            self.write(line)

    # --------------------------------------------------------------- inline

    def inline(self, children: Sequence[Token]) -> None:
        stack: list[tuple[str, int, str]] = []  # (open type, start, href)
        # `||hidden||` is Telegram's spoiler markup; CommonMark leaves it in text tokens.
        markers = sum(t.content.count(_SPOILER) for t in children if t.type == "text")
        self.spoilers_left = markers - markers % 2
        self.spoiler_start = None
        for token in children:
            match token.type:
                case "text":
                    self._text_with_spoilers(token.content)
                case "html_inline":
                    self.write(token.content)
                case "softbreak" | "hardbreak":
                    self.write("\n", find=False)
                case "code_inline":
                    start = self.size
                    self.write(token.content)
                    self.span("code", start)
                case "strong_open" | "em_open" | "s_open" | "link_open":
                    href = str(token.attrs.get("href", "")) if token.type == "link_open" else ""
                    stack.append((token.type, self.size, href))
                case "strong_close" | "em_close" | "s_close" | "link_close":
                    if not stack:
                        continue
                    kind, start, href = stack.pop()
                    self._close_inline(kind, start, href)
                    if kind == "link_open":
                        self.skip_link_target()
                case "image":  # its alt text, linking to the picture
                    start = self.size
                    source = str(token.attrs.get("src", ""))
                    self.write(_plain(token.children or []) or source)
                    self._close_inline("link_open", start, source)
                case _:
                    if token.content:
                        self.write(token.content)

    def _wrote_since(self, start: int, text: str) -> bool:
        """Whether exactly `text` was written since rendered position `start`."""
        if self.size - start != len(text):
            return False
        tail, parts = "", len(self.parts)
        while len(tail) < len(text) and parts:
            parts -= 1
            tail = self.parts[parts] + tail
        return tail.endswith(text)

    def _text_with_spoilers(self, text: str) -> None:
        pieces = text.split(_SPOILER)
        for index, piece in enumerate(pieces):
            if index:
                if self.spoilers_left > 0:
                    self.spoilers_left -= 1
                    if self.spoiler_start is None:
                        self.spoiler_start = self.size
                    else:
                        self.span("spoiler", self.spoiler_start)
                        self.spoiler_start = None
                else:
                    self.write(_SPOILER)
            self.write(piece)

    def _close_inline(self, kind: str, start: int, href: str) -> None:
        match kind:
            case "strong_open":
                self.span("bold", start)
            case "em_open":
                self.span("italic", start)
            case "s_open":
                self.span("strikethrough", start)
            case "link_open":
                # A bare URL shows itself; Telegram links it without an entity.
                if _LINK_SCHEMES.match(href) and not self._wrote_since(start, href):
                    self.span("text_link", start, url=href)
                    # Telegram lets no code entity sit inside a link: the link wins.
                    self.spans = [
                        s for s in self.spans if not (s.kind == "code" and s.start >= start)
                    ]

    def result(self) -> _Rendered:
        return _Rendered(
            source=self.source,
            text="".join(self.parts),
            spans=tuple(sorted(self.spans, key=lambda s: (s.start, -s.end))),
            block_starts=tuple(self.block_starts),
            anchors=tuple(self.anchors),
        )


def _plain(children: Sequence[Token]) -> str:
    """The text of inline tokens without their markup (a table cell)."""
    parts: list[str] = []
    for token in children:
        if token.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif token.type == "image":
            parts.append(_plain(token.children or []))
        else:
            parts.append(token.content)
    return "".join(parts).strip()


def _render(source: str) -> _Rendered:
    """Plain text and entity spans for the model's Markdown (pure; never raises on input)."""
    renderer = _Renderer(source)
    renderer.blocks(_MD.parse(source))
    return renderer.result()


# ------------------------------------------------------------------- splitting

MAX_BUBBLES_PER_REPLY = 6
"""Messages one reply may become (6 x 4,096 characters is a long answer already; a model
that writes 100 kB would otherwise post 25 messages and hold the chat for seconds)."""
DEFAULT_CUT_NOTE = "…(reply cut here: at most {count} messages per reply)"


def plan_reply(
    source: str,
    limit: int = TELEGRAM_TEXT_LIMIT,
    *,
    max_bubbles: int = MAX_BUBBLES_PER_REPLY,
    cut_note: str = DEFAULT_CUT_NOTE,
) -> tuple[Bubble, ...]:
    """`plan_bubbles` for a reply, at most `max_bubbles` of them. A longer reply keeps its
    first `max_bubbles - 1` bubbles and ends with a bubble saying it was cut (`cut_note`,
    `{count}` filled in). The source is cut before it is parsed, to twice what the kept
    bubbles can show, so planning time is bounded whatever the model wrote."""
    if max_bubbles < 2:
        raise ValueError("max_bubbles must be at least 2")
    budget = 2 * max_bubbles * limit
    bubbles = plan_bubbles(source[:budget], limit)
    if len(bubbles) <= max_bubbles and len(source) <= budget:
        return bubbles
    note = cut_note.format(count=max_bubbles)
    return (*bubbles[: max_bubbles - 1], Bubble(source=note, text=note, entities=()))


def plan_bubbles(source: str, limit: int = TELEGRAM_TEXT_LIMIT) -> tuple[Bubble, ...]:
    """The bubbles to send for the model's Markdown `source`, each at most `limit` UTF-16
    units of rendered text; blank input gives none."""
    if limit < 2:
        raise ValueError("limit must be at least 2 UTF-16 units")
    rendered = _render(source)
    text = rendered.text
    pres = [s for s in rendered.spans if s.kind == "pre"]
    ranges: list[tuple[int, int]] = []
    resumes: list[int] = []  # where each later bubble's text resumes, before whitespace
    start = _skip_space(text, 0, pres)
    while start < len(text):
        rest = text[start:]
        if utf16_len(rest) <= limit:
            end = len(text)
            ranges.append((start, end))
            break
        fit = start + prefix_fitting(rest, limit)
        end, resume = best_cut(text, start, fit, limit, rendered.block_starts, pres)
        ranges.append((start, end))
        resumes.append(resume)
        start = _skip_space(text, resume, pres)
    bubbles: list[Bubble] = []
    units = _utf16_offsets(text)
    cuts = [
        source_at(rendered.anchors, len(rendered.source), resume, begin)
        for resume, (begin, _) in zip(resumes, ranges[1:], strict=False)
    ]
    for index, (begin, end) in enumerate(ranges):
        end = _trim_end(text, begin, end)
        if end <= begin:
            continue
        src_start = 0 if index == 0 else cuts[index - 1]
        src_end = cuts[index] if index < len(cuts) else len(source)
        bubbles.append(
            Bubble(
                source=source[src_start:src_end].lstrip("\r\n").rstrip(),
                text=text[begin:end],
                entities=_entities(text, units, rendered.spans, begin, end),
            )
        )
    return tuple(bubbles)


def _skip_space(text: str, index: int, pres: Sequence[_Span]) -> int:
    """Where the next bubble starts: past whitespace, but keep a code line's indentation."""
    while index < len(text) and text[index].isspace():
        if text[index] != "\n" and inside(pres, index) is not None:
            break
        index += 1
    return index


def _trim_end(text: str, begin: int, end: int) -> int:
    while end > begin and text[end - 1].isspace():
        end -= 1
    return end


def _utf16_offsets(text: str) -> list[int]:
    """`result[i]` is the UTF-16 offset of character `i` (and of the end, at `len(text)`)."""
    offsets = [0] * (len(text) + 1)
    units = 0
    for index, ch in enumerate(text):
        offsets[index] = units
        units += 2 if ord(ch) > 0xFFFF else 1
    offsets[len(text)] = units
    return offsets


def _entities(
    text: str, units: Sequence[int], spans: Sequence[_Span], begin: int, end: int
) -> tuple[Entity, ...]:
    """Spans clipped to `begin`..`end`, in UTF-16 units relative to `begin` (`units` is
    `_utf16_offsets(text)`)."""
    found: list[Entity] = []
    for span in spans:
        if span.start >= end:
            break  # sorted by start
        lo, hi = max(span.start, begin), min(span.end, end)
        if hi <= lo or text[lo:hi].isspace():
            continue
        found.append(
            Entity(
                type=span.kind,
                offset=units[lo] - units[begin],
                length=units[hi] - units[lo],
                url=span.url,
                language=span.language,
            )
        )
    return tuple(found)
