"""read_document: the text of a file a member posted in this chat, by its message's alias.

Text-like files (txt, md, csv, json, code, logs) whole, PDFs through their text layer page
by page: a long PDF fills the result up to the record-time cap and says which page to ask
for next. A scanned PDF, an archive or any other type is a tool error that says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.context.escaping import escape_member_text, inline_value
from bot.errors import MediaRefused, ToolError
from bot.ports import DocumentText, ToolSpec
from bot.tools.base import ShownByTool, Tool, ToolContext, require_int

DOCUMENT_KINDS = frozenset({"document", "audio", "video", "animation"})
"""Message kinds that carry a named file; read_document decides by the file itself."""
HEADER_ROOM = 300
"""Characters kept free for the result's header and its "next page" line."""


async def read_document(args: Mapping[str, Any], ctx: ToolContext) -> str:
    message_id = require_int(args, "reference")
    page = args.get("page")
    if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
        raise ToolError("page must be a page number from 1", code="bad_arguments")
    media = ctx.media
    if media is None or media.files is None:
        raise ToolError("files cannot be fetched here", code="unavailable")
    # this chat only: a message of another chat (and its file) is not found here
    message = await ctx.platform_messages.find_platform_message(ctx.chat_id, message_id)
    if message is None:
        raise ToolError("that message is not known in this chat", code="not_found")
    label = (ctx.shown.alias_of(message_id) if ctx.shown else None) or str(message_id)
    files = [m for m in message.media if m.kind in DOCUMENT_KINDS and m.file_id]
    if not files:
        kinds = ", ".join(m.kind for m in message.media) or "text only"
        raise ToolError(f"{label} holds no document ({kinds})", code="no_document")
    document = files[0]
    if isinstance(ctx.shown, ShownByTool):  # its words go with the message, should it be deleted
        ctx.shown.carry(message_id)
    room = max(1000, media.max_result_chars - HEADER_ROOM)
    try:
        text = await media.files.text(document, page=page, max_chars=room)
    except MediaRefused as refused:
        raise ToolError(f"{label}: {refused.reason}", code="unreadable") from None
    return render(label, document.file_name or "", text, room)


def render(label: str, name: str, text: DocumentText, room: int) -> str:
    """The result: a header line naming the file and what is shown, then the text; a PDF's
    pages each under a `--- page N ---` line, cut at `room` with the page to ask for next.
    The file's words are escaped like a member's (`bot.context.escaping`): a line of it
    that opens like one of our blocks (`[quote …]`, `[Turn context]`, `[id:…]`) never
    reads as the bot's own."""
    title = inline_value(name) or label  # the member named the file
    if text.kind == "text":
        body = escape_member_text(text.pages[0])
        cut = len(body) > room
        shown = body[:room]
        more = f"\n…({len(body) - room} more characters not shown)" if cut else ""
        return f"[document {label}: {title}, {len(body)} characters]\n{shown}{more}"
    parts: list[str] = []
    used = 0
    last = text.first_page - 1
    for offset, page_text in enumerate(text.pages):
        number = text.first_page + offset
        block = f"--- page {number} ---\n{escape_member_text(page_text.strip())}"
        if parts and used + len(block) > room:
            break
        parts.append(block[: max(0, room - used)])
        used += len(parts[-1])
        last = number
    count = text.page_count or last
    shown = (
        f"page {text.first_page}" if last == text.first_page else f"pages {text.first_page}-{last}"
    )
    header = f"[document {label}: {title}, PDF, {count} pages; {shown} shown]"
    tail = ""
    if last < count:
        tail = f"\n…(continue with read_document({label}, page={last + 1}))"
    return header + "\n" + "\n".join(parts) + tail


TOOL = Tool(
    spec=ToolSpec(
        name="read_document",
        description=(
            "Read a file posted in this chat: text files (txt, md, csv, json, code, logs) and "
            "PDFs (their text layer). Pass the message's alias (m12); for a long PDF, `page` "
            "reads from that page on. Scanned PDFs and other types cannot be read."
        ),
        parameters={
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "the message's alias, e.g. m12"},
                "page": {"type": "integer", "minimum": 1, "description": "PDF page to start at"},
            },
            "required": ["reference"],
        },
    ),
    run=read_document,
    summary="read_document(reference, page=None) — read a posted text file or PDF",
)
