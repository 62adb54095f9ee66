"""`tgbot import-legacy FILE`: load a JSONL export of legacy rows, never rewriting them.

The accepted legacy row shape, one JSON object per line (unknown keys are ignored):

    {"chat_id": -1001234, "thread_id": 0, "scene": "group",        # session
     "role": "user" | "assistant" | "tool",
     "time": "2026-10-28T14:03:00+00:00",
     "message_id": 812, "message_ids": [812, null, 814],           # platform ids, optional
     "sender": {"id": 1001, "name": "Alice", "is_bot": false},     # user rows
     "content": "text" | [{"type": "text", "text": "…"},
                          {"type": "contextRef", "key": "workspace-rules", "text": "…"}],
     "tool_calls": [{"id": "c1", "name": "search", "arguments": "{…}"}],   # assistant rows
     "tool_call_id": "c1", "name": "search", "is_error": false}           # tool rows

User rows keep their blocks exactly as exported (per-turn blocks included) and are marked
legacy (`UserRecord.legacy`): projection strips `[Turn context]` / `[Already told the user]`
text blocks and the per-turn context-ref keys from legacy messages that are not the current
one, and reads a legacy row starting with `[Tool results]` as a tool-results carrier. Rows
written by the bot itself are never marked, so a member's own text is never stripped.
Consecutive tool rows become one tool-results record. A bad line is reported with its
number and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.context.projection import record_tokens
from bot.domain.facts import Sender
from bot.domain.ids import Scene, SessionKey
from bot.domain.messages import ToolCall
from bot.domain.records import (
    AssistantRecord,
    ContentBlock,
    RecordBody,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.ports import NewRecord
from bot.store_ports import HistoryStore, SessionStore


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyRow:
    key: SessionKey
    scene: Scene
    record: NewRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportReport:
    imported: int
    sessions: int
    errors: tuple[str, ...]


def _blocks(content: Any) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (ContentBlock(type="text", text=content),)
    if not isinstance(content, list):
        raise ValueError("content must be a string or a list of blocks")
    blocks = []
    for block in content:
        if not isinstance(block, dict):
            raise ValueError("a content block must be an object")
        kind = block.get("type")
        if kind == "text":
            blocks.append(ContentBlock(type="text", text=str(block.get("text", ""))))
        elif kind == "contextRef":
            blocks.append(
                ContentBlock(
                    type="contextRef", text=str(block.get("text", "")), key=str(block.get("key"))
                )
            )
        else:
            raise ValueError(f"unknown block type {kind!r}")
    return tuple(blocks)


def _text(content: Any) -> str:
    return "\n\n".join(b.text for b in _blocks(content) if b.type == "text")


def parse_row(row: Any) -> tuple[SessionKey, Scene, str, NewRecord]:
    """One legacy row → (session, scene, role, record). Raises ValueError on a bad row."""
    if not isinstance(row, dict):
        raise ValueError("a row must be a JSON object")
    key = SessionKey(chat_id=int(row["chat_id"]), thread_id=int(row.get("thread_id") or 0))
    scene = row.get("scene", "group")
    if scene not in ("group", "private", "owner"):
        raise ValueError(f"unknown scene {scene!r}")
    when = datetime.fromisoformat(str(row["time"]))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    role = row.get("role")
    ids_raw = row.get("message_ids")
    if ids_raw is None and row.get("message_id") is not None:
        ids_raw = [row["message_id"]]
    ids = tuple(None if i is None else int(i) for i in (ids_raw or []))
    body: RecordBody
    if role == "user":
        sender = row.get("sender") or {}
        content = row.get("content", "")
        # A flat string stays flat text, so projection strips its per-turn paragraphs
        # (`legacy.strip_per_turn_text`); as one block it would be kept whole.
        body = UserRecord(
            sender=Sender(
                id=int(sender.get("id", 0)),
                name=str(sender.get("name", "")),
                is_bot=bool(sender.get("is_bot", False)),
            ),
            text=content if isinstance(content, str) else "",
            blocks=() if isinstance(content, str) else _blocks(content),
            legacy=True,
        )
    elif role == "assistant":
        calls = tuple(
            ToolCall(
                id=str(c["id"]),
                name=str(c["name"]),
                arguments=c["arguments"]
                if isinstance(c.get("arguments"), str)
                else json.dumps(c.get("arguments", {})),
            )
            for c in row.get("tool_calls") or []
        )
        body = AssistantRecord(text=_text(row.get("content", "")), tool_calls=calls)
    elif role == "tool":
        body = ToolResultsRecord(
            results=(
                ToolResult(
                    call_id=str(row["tool_call_id"]),
                    name=str(row.get("name", "")),
                    content=_text(row.get("content", "")),
                    is_error=bool(row.get("is_error", False)),
                ),
            )
        )
    else:
        raise ValueError(f"unknown role {role!r}")
    record = NewRecord(body=body, created_at=when, message_ids=ids, tokens=record_tokens(body))
    return key, scene, role, record


def parse_lines(lines: Iterable[str]) -> Iterator[tuple[int, LegacyRow | str]]:
    """(line number, row) or (line number, error text) for every non-empty line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            key, scene, _role, record = parse_row(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            yield number, f"line {number}: {exc}"
            continue
        yield number, LegacyRow(key=key, scene=scene, record=record)


async def import_legacy_rows(
    lines: Iterable[str], *, sessions: SessionStore, history: HistoryStore
) -> ImportReport:
    errors: list[str] = []
    opened: dict[SessionKey, int] = {}
    imported = 0
    pending: dict[int, list[NewRecord]] = {}

    async def flush(session_id: int) -> None:
        batch = pending.pop(session_id, [])
        if batch:
            await history.append(session_id, batch)

    for _number, item in parse_lines(lines):
        if isinstance(item, str):
            errors.append(item)
            continue
        if item.key not in opened:
            info = await sessions.open_session(item.key, scene=item.scene)
            opened[item.key] = info.id
        session_id = opened[item.key]
        batch = pending.setdefault(session_id, [])
        body = item.record.body
        if batch and isinstance(body, ToolResultsRecord):
            previous = batch[-1].body
            if isinstance(previous, ToolResultsRecord):
                merged = ToolResultsRecord(results=previous.results + body.results)
                batch[-1] = NewRecord(
                    body=merged,
                    created_at=batch[-1].created_at,
                    tokens=record_tokens(merged),
                )
                imported += 1
                continue
        if isinstance(body, UserRecord) and len(batch) >= 500:
            await flush(session_id)
            batch = pending.setdefault(session_id, [])
        batch.append(item.record)
        imported += 1
    for session_id in list(pending):
        await flush(session_id)
    return ImportReport(imported=imported, sessions=len(opened), errors=tuple(errors))
