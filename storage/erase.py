"""Erasing a message deleted in the chat, on SQL: its row, its index entry, its records.

One transaction (`SqlStore.erase_message`): the `platform_events` row keeps its place (the
sender, the time, the record it belongs to) but loses its text and media; the search index
drops it; every record holding it (the one it was stored with, and a re-answered edit's
copy on a newer branch, found by `first_message_id`) and every record quoting it is
rewritten by `bot.domain.erasure`, and so is every tool result that showed its words
(found by the words, among the records without a platform id of the chat's sessions) or
carried its content (a document read, an image viewed). A
deletion is rare, so these are found through the rows the indexes already reach rather
than new indexes.
"""

from __future__ import annotations

import json

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.erasure import (
    deleted_trace,
    erased_body,
    without_content_of,
    without_deleted_lines,
    without_quoted_text,
)
from bot.domain.records import RecordBody
from storage.codec import stored_record
from storage.payload import encode_payload
from storage.plan import SqlParts
from storage.plan_run import run_plan
from storage.queries import PLATFORM_MESSAGE_BY_KEY, RECORD_COLUMNS
from storage.tables import MESSAGES, PLATFORM_MESSAGES, SESSIONS

_ROW = update(PLATFORM_MESSAGES).where(
    PLATFORM_MESSAGES.c.chat_id == bindparam("in_chat"),
    PLATFORM_MESSAGES.c.message_id == bindparam("of_message"),
)
_BLANK = _ROW.values(text="", media="[]")
_BLANK_WORDS = _ROW.values(text="")
_HOLDERS = select(*RECORD_COLUMNS).where(
    MESSAGES.c.session_id.in_(
        select(SESSIONS.c.id).where(SESSIONS.c.chat_id == bindparam("chat_id"))
    ),
    MESSAGES.c.first_message_id == bindparam("message_id"),
)
_CHAT_SESSIONS = select(SESSIONS.c.id).where(SESSIONS.c.chat_id == bindparam("chat_id"))
_QUOTING = select(PLATFORM_MESSAGES.c.record_id).where(
    PLATFORM_MESSAGES.c.chat_id == bindparam("chat_id"),
    PLATFORM_MESSAGES.c.reply_to_message_id == bindparam("message_id"),
    PLATFORM_MESSAGES.c.record_id.is_not(None),
)


async def erase_rows(
    conn: AsyncConnection,
    parts: SqlParts,
    chat_id: int,
    message_id: int,
    *,
    keep_media: bool = False,
) -> bool:
    """Erase platform message `message_id` of `chat_id` (module docstring; `keep_media`:
    only its words); False when it is not stored."""
    key = {"chat_id": chat_id, "message_id": message_id}
    row = (await conn.execute(PLATFORM_MESSAGE_BY_KEY, key)).first()
    if row is None:
        return False
    await run_plan(conn, parts.unindex(chat_id, message_id))
    where = {"in_chat": chat_id, "of_message": message_id}
    await conn.execute(_BLANK_WORDS if keep_media else _BLANK, where)
    holders = {r.id: r for r in (await conn.execute(_HOLDERS, key)).all()}
    if row.record_id is not None and row.record_id not in holders:
        extra = select(*RECORD_COLUMNS).where(MESSAGES.c.id == row.record_id)
        holders.update((r.id, r) for r in (await conn.execute(extra)).all())
    for holder in holders.values():
        record = stored_record(holder)
        bubbles = [mid for mid in record.message_ids if mid is not None and mid != message_id]
        texts: dict[int, str] = {}
        if bubbles:
            found = select(PLATFORM_MESSAGES.c.message_id, PLATFORM_MESSAGES.c.text).where(
                PLATFORM_MESSAGES.c.chat_id == chat_id,
                PLATFORM_MESSAGES.c.message_id.in_(bubbles),
            )
            texts = {int(r.message_id): str(r.text) for r in (await conn.execute(found)).all()}
        body = erased_body(record, message_id, texts, keep_media=keep_media)
        await _rewrite(conn, holder.id, body, record.message_ids)
    trace = deleted_trace(row.text)
    if trace is not None:
        await _erase_shown_lines(conn, chat_id, trace)
    await _erase_carried(conn, chat_id, message_id)
    quoting = set((await conn.execute(_QUOTING, key)).scalars()) - set(holders)
    for record_id in sorted(quoting):
        found_row = (
            await conn.execute(select(*RECORD_COLUMNS).where(MESSAGES.c.id == record_id))
        ).first()
        if found_row is None:
            continue
        record = stored_record(found_row)
        body = without_quoted_text(record.body, message_id)
        if body is not record.body:
            await _rewrite(conn, record_id, body, record.message_ids)
    return True


async def _erase_shown_lines(conn: AsyncConnection, chat_id: int, trace: str) -> None:
    """Tool results of the chat's sessions that showed the message (records without a
    platform id: `first_message_id IS NULL` keeps to the index's side of them)."""
    needle = json.dumps(trace, ensure_ascii=False)[1:-1]  # as the codec stores it
    shown = select(*RECORD_COLUMNS).where(
        MESSAGES.c.session_id.in_(_CHAT_SESSIONS),
        MESSAGES.c.first_message_id.is_(None),
        MESSAGES.c.kind == "tool_results",
        MESSAGES.c.payload.contains(needle, autoescape=True),
    )
    for found in (await conn.execute(shown, {"chat_id": chat_id})).all():
        record = stored_record(found)
        body = without_deleted_lines(record.body, trace)
        if body is not record.body:
            await _rewrite(conn, found.id, body, record.message_ids)


async def _erase_carried(conn: AsyncConnection, chat_id: int, message_id: int) -> None:
    """Tool results of the chat's sessions that carried the message's content (a document
    read, an image viewed: `ToolResult.content_of`), found by the stored field."""
    carried = select(*RECORD_COLUMNS).where(
        MESSAGES.c.session_id.in_(_CHAT_SESSIONS),
        MESSAGES.c.first_message_id.is_(None),
        MESSAGES.c.kind == "tool_results",
        MESSAGES.c.payload.contains('"contentOf":', autoescape=True),
        MESSAGES.c.payload.contains(str(message_id), autoescape=True),
    )
    for found in (await conn.execute(carried, {"chat_id": chat_id})).all():
        record = stored_record(found)
        body = without_content_of(record.body, message_id)
        if body is not record.body:
            await _rewrite(conn, found.id, body, record.message_ids)


async def _rewrite(
    conn: AsyncConnection, record_id: int, body: RecordBody, message_ids: tuple[int | None, ...]
) -> None:
    payload = encode_payload(body, message_ids)
    await conn.execute(update(MESSAGES).where(MESSAGES.c.id == record_id).values(payload=payload))
