"""What a deleted message leaves behind in the records that held or quoted it.

A message deleted in the chat (by the bot's `delete_message`, by Telegram's report, or a
member's edit that leaves nothing) keeps its place in the conversation, so aliases and turns
stay as they were, but none of its words: the record that held it renders `[deleted]`
(docs/context-window.md, Deleted messages), a quote of it keeps the relation only, and a
tool result that showed it (a `search_history` hit, an inspected reference) keeps its line's
fields with `[deleted]` for the words, and a tool result that carried its content (a
document read, an image viewed) is `[deleted]` whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bot.domain.records import (
    AssistantRecord,
    RecordBody,
    StoredRecord,
    ToolResultsRecord,
    UserRecord,
)

DELETED_MARKER = "[deleted]"
"""What stands where a deleted message's content was (a system marker, in every locale)."""
TRACE_CHARS = 60
MIN_TRACE_CHARS = 12
"""Shorter words ("ok", "thanks!") would find other messages' lines: they are not traced."""


def erased_body(
    record: StoredRecord,
    message_id: int,
    bubble_texts: Mapping[int, str] | None,
    *,
    keep_media: bool = False,
) -> RecordBody:
    """`record`'s body once its platform message `message_id` is deleted.

    A member's message keeps its sender and relations (reply, album) and loses its text,
    media, forwarded origin and quoted text; with `keep_media` (a member edited every word
    out of a caption) only its words go, and it is deleted only when it had no media. A
    reply of the bot loses the deleted bubble's words: with one bubble the text is the
    marker; with several the text is rebuilt from the other bubbles' `bubble_texts`
    (platform id → the bubble's text as delivered), each deleted one standing as the
    marker; without them (None: not at hand) it stays as it is. Its tool calls stay (they
    are the turn's own steps). Other kinds are returned as they are.
    """
    body = record.body
    match body:
        case UserRecord() if keep_media and body.media:
            return replace(body, text="", blocks=())
        case UserRecord():
            return replace(
                body, deleted=True, text="", media=(), forward=None, quote=None, blocks=()
            )
        case AssistantRecord():
            confirmed = [mid for mid in record.message_ids if mid is not None]
            if len(confirmed) <= 1:
                return replace(body, text=DELETED_MARKER if body.text else "")
            if bubble_texts is None:
                return body
            parts = [
                DELETED_MARKER if mid == message_id else bubble_texts.get(mid) or DELETED_MARKER
                for mid in confirmed
            ]
            return replace(body, text="\n".join(parts))
        case _:
            return body


def without_quoted_text(body: RecordBody, message_id: int) -> RecordBody:
    """`body` with the quoted text of `message_id` gone, when it quotes that message."""
    if not isinstance(body, UserRecord) or body.quote is None or body.quote.id != message_id:
        return body
    quote = replace(body.quote, summary=DELETED_MARKER, truncated=False, forwarded_from=None)
    return replace(body, quote=quote)


def without_content_of(body: RecordBody, message_id: int) -> RecordBody:
    """`body` with every tool result that carries `message_id`'s content (a document's
    text, an image: `ToolResult.content_of`) reduced to the marker; its call stays."""
    if not isinstance(body, ToolResultsRecord) or not any(
        message_id in result.content_of for result in body.results
    ):
        return body
    results = tuple(
        replace(result, content=DELETED_MARKER) if message_id in result.content_of else result
        for result in body.results
    )
    return replace(body, results=results)


def deleted_trace(text: str) -> str | None:
    """The words a tool result shows of a message: its start on one line, up to a bracket
    (results escape brackets), at most `TRACE_CHARS`; None when too short to tell apart."""
    start = " ".join(text.split())[:TRACE_CHARS].split("[", 1)[0].strip()
    return start if len(start) >= MIN_TRACE_CHARS else None


def without_deleted_lines(body: RecordBody, trace: str) -> RecordBody:
    """`body` with every tool-result line that shows `trace` (`deleted_trace`) erased: a
    quote line keeps its fields, `[quote id:m42;user:Carol;…] [deleted]`; any other line
    becomes `[deleted]`."""
    if not isinstance(body, ToolResultsRecord) or not any(
        trace in result.content for result in body.results
    ):
        return body
    results = tuple(
        replace(result, content="\n".join(_erased_line(line, trace) for line in lines))
        if trace in result.content
        else result
        for result in body.results
        for lines in [result.content.split("\n")]
    )
    return replace(body, results=results)


def _erased_line(line: str, trace: str) -> str:
    if trace not in line:
        return line
    fields_end = line.find("] ") if line.startswith("[quote ") else -1
    return line[: fields_end + 2] + DELETED_MARKER if fields_end > 0 else DELETED_MARKER
