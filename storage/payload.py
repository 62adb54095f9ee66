"""A record's payload and a platform message's media as JSON text: pure, both directions.

A record's payload (camelCase keys, defaults left out):

    {"kind": "user", "messageId": 501, "messageIds": [501],
     "sender": {"id": 7, "name": "Ann"}, "text": "hi", "quote": {"id": 499, ...}}

`messageId` is the first confirmed platform id (kept for old rows), `messageIds` the ordered
slots (`null` for an unconfirmed one). The runtime fields `aliasSeq` / `aliasParts` are never
written and are ignored when an old payload carries them. Decoding ignores unknown keys, and a
legacy row with only `messageId` reads as one slot. Datetimes are ISO 8601 strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast, get_args

from bot.domain.facts import Forward, Media, MediaKind, Quote, Sender, SenderKind
from bot.domain.messages import Reasoning, ReasoningFormat, ToolCall
from bot.domain.records import (
    AssistantRecord,
    ContentBlock,
    RecordBody,
    ServiceMessageRecord,
    SummaryRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)

RUNTIME_KEYS = frozenset({"aliasSeq", "aliasParts"})

_MEDIA_KINDS = frozenset(get_args(MediaKind))
_SENDER_KINDS = frozenset(get_args(SenderKind))

Json = dict[str, Any]


class PayloadError(ValueError):
    """A payload that cannot be read as a record body."""


# ---------------------------------------------------------------- encode


def encode_payload(body: RecordBody, message_ids: Sequence[int | None]) -> str:
    """The payload text of a record: its body and its platform ids."""
    data: Json = {"kind": body.kind}
    first = first_message_id(message_ids)
    if first is not None:
        data["messageId"] = first
    if message_ids:
        data["messageIds"] = list(message_ids)
    data.update(_encode_body(body))
    return _dumps(data)


def with_message_ids(payload: str, message_ids: Sequence[int | None]) -> str:
    """`payload` with its `messageId` / `messageIds` replaced (other keys kept as they are)."""
    data = _loads(payload)
    for key in ("messageId", "messageIds", *RUNTIME_KEYS):
        data.pop(key, None)
    first = first_message_id(message_ids)
    if first is not None:
        data["messageId"] = first
    if message_ids:
        data["messageIds"] = list(message_ids)
    return _dumps(data)


def first_message_id(message_ids: Sequence[int | None]) -> int | None:
    return next((mid for mid in message_ids if mid is not None), None)


def encode_message_ids(message_ids: Sequence[int | None]) -> str:
    return json.dumps(list(message_ids), separators=(",", ":"))


def decode_message_ids(text: str) -> tuple[int | None, ...]:
    return tuple(None if mid is None else int(mid) for mid in json.loads(text))


def encode_media(media: Sequence[Media]) -> str:
    return _dumps([_compact(_media(m)) for m in media])


def decode_media(text: str) -> tuple[Media, ...]:
    items = json.loads(text) if text else []
    return tuple(_read_media(item) for item in items if isinstance(item, dict))


def _encode_body(body: RecordBody) -> Json:
    match body:
        case UserRecord():
            return _compact(
                {
                    "sender": _sender(body.sender),
                    "text": body.text,
                    "media": [_compact(_media(m)) for m in body.media],
                    "quote": _quote(body.quote) if body.quote else None,
                    "forward": _forward(body.forward) if body.forward else None,
                    "merged": body.merged,
                    "album": body.album,
                    "linked_channel": body.linked_channel,
                    "paid_stars": body.paid_stars,
                    "refused": body.refused,
                    "deleted": body.deleted,
                    "legacy": body.legacy,
                    "blocks": [
                        _compact({"type": b.type, "text": b.text, "key": b.key})
                        for b in body.blocks
                    ],
                }
            )
        case AssistantRecord():
            return _compact(
                {
                    "text": body.text,
                    "toolCalls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments}
                        for c in body.tool_calls
                    ],
                    "reasoning": _reasoning(body.reasoning) if body.reasoning else None,
                }
            )
        case ToolResultsRecord():
            return {
                "results": [
                    _compact(
                        {
                            "callId": r.call_id,
                            "name": r.name,
                            "content": r.content,
                            "isError": r.is_error,
                            "errorCode": r.error_code,
                            "shown": [list(pair) for pair in r.shown] or None,
                            "shownRefs": list(r.shown_references) or None,
                            "contentOf": list(r.content_of) or None,
                        }
                    )
                    for r in body.results
                ]
            }
        case ServiceMessageRecord():
            return _compact(
                {"text": body.text, "actor": _sender(body.actor) if body.actor else None}
            )
        case SummaryRecord():
            return _compact(
                {
                    "text": body.text,
                    "first": body.first_alias or None,
                    "last": body.last_alias or None,
                    "aliases": [[alias, mid] for alias, mid in body.aliases] or None,
                }
            )


def _sender(sender: Sender) -> Json:
    data = _compact(
        {
            "id": sender.id,
            "name": sender.name,
            "username": sender.username,
            "isBot": sender.is_bot,
            "viaBot": sender.via_bot,
        }
    )
    if sender.kind != "user":
        data["kind"] = sender.kind
    return data


def _media(media: Media) -> Json:
    details = _compact(
        {
            "title": media.title,
            "detail": media.detail,
            "value": media.value,
            "fileUniqueId": media.file_unique_id,
            "width": media.width,
            "height": media.height,
            "mimeType": media.mime_type,
            "fileSize": media.file_size,
            "transcript": media.transcript,
            "closed": media.closed,
        }
    )
    return {
        "kind": media.kind,
        "duration": media.duration,
        "fileName": media.file_name,
        "emoji": media.emoji,
        "fileId": media.file_id,
        **details,
    }


def _quote(quote: Quote) -> Json:
    return _compact(
        {
            "id": quote.id,
            "senderId": quote.sender_id,
            "timestamp": _time(quote.timestamp),
            "summary": quote.summary,
            "truncated": quote.truncated,
            "chatId": quote.chat_id,
            "fragment": quote.fragment,
            "chatName": quote.chat_name,
            "forwardedFrom": quote.forwarded_from,
            "task": quote.task,
            "story": quote.story,
        }
    )


def _forward(forward: Forward) -> Json:
    return _compact(
        {
            "fromName": forward.from_name,
            "fromId": forward.from_id,
            "hidden": forward.hidden,
            "date": _time(forward.date),
        }
    )


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _compact(data: Json) -> Json:
    """Leaves out defaults (None, False, "", []) so payloads stay small."""
    return {
        k: v for k, v in data.items() if v is not None and v is not False and v != "" and v != []
    }


def _dumps(data: Json | list[Json]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- decode


def decode_payload(payload: str) -> tuple[RecordBody, tuple[int | None, ...]]:
    """The body and the platform id slots of a stored payload."""
    data = _loads(payload)
    return _decode_body(data), _read_message_ids(data)


def _loads(payload: str) -> Json:
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise PayloadError(f"payload is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PayloadError("payload is not a JSON object")
    return data


def _read_message_ids(data: Mapping[str, Any]) -> tuple[int | None, ...]:
    slots = data.get("messageIds")
    if isinstance(slots, list):
        return tuple(None if mid is None else int(mid) for mid in slots)
    first = data.get("messageId")
    return () if first is None else (int(first),)


def _decode_body(data: Mapping[str, Any]) -> RecordBody:
    kind = data.get("kind")
    match kind:
        case "user":
            return UserRecord(
                sender=_read_sender(data.get("sender")) or Sender(id=0, name=""),
                text=str(data.get("text", "")),
                media=tuple(_read_media(m) for m in _list(data, "media")),
                quote=_read_quote(data.get("quote")),
                forward=_read_forward(data.get("forward")),
                merged=bool(data.get("merged", False)),
                album=str(data["album"]) if data.get("album") else None,
                linked_channel=bool(data.get("linked_channel", False)),
                paid_stars=_opt_int(data.get("paid_stars")),
                refused=bool(data.get("refused", False)),
                deleted=bool(data.get("deleted", False)),
                legacy=bool(data.get("legacy", False)),
                blocks=tuple(_read_block(b) for b in _list(data, "blocks")),
            )
        case "assistant":
            return AssistantRecord(
                text=str(data.get("text", "")),
                tool_calls=tuple(
                    ToolCall(
                        id=str(c.get("id", "")),
                        name=str(c.get("name", "")),
                        arguments=str(c.get("arguments", "{}")),
                    )
                    for c in _list(data, "toolCalls")
                ),
                reasoning=_read_reasoning(data.get("reasoning")),
            )
        case "tool_results":
            return ToolResultsRecord(
                results=tuple(
                    ToolResult(
                        call_id=str(r.get("callId", "")),
                        name=str(r.get("name", "")),
                        content=str(r.get("content", "")),
                        is_error=bool(r.get("isError", False)),
                        error_code=_opt_str(r.get("errorCode")),
                        shown=_alias_pairs(r.get("shown")),
                        shown_references=tuple(
                            mid for mid in r.get("shownRefs") or () if type(mid) is int
                        ),
                        content_of=tuple(
                            mid for mid in r.get("contentOf") or () if type(mid) is int
                        ),
                    )
                    for r in _list(data, "results")
                )
            )
        case "event":
            return ServiceMessageRecord(
                text=str(data.get("text", "")), actor=_read_sender(data.get("actor"))
            )
        case "summary":
            pairs = data.get("aliases") or []
            return SummaryRecord(
                text=str(data.get("text", "")),
                first_alias=str(data.get("first") or ""),
                last_alias=str(data.get("last") or ""),
                aliases=tuple(
                    (str(pair[0]), int(pair[1]))
                    for pair in pairs
                    if isinstance(pair, list) and len(pair) == 2
                ),
            )
    raise PayloadError(f"unknown record kind {kind!r}")


def _alias_pairs(raw: object) -> tuple[tuple[str, int], ...]:
    """Stored `[alias, platform id]` pairs; malformed ones are skipped."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        (pair[0], pair[1])
        for pair in raw
        if isinstance(pair, list)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and type(pair[1]) is int
    )


_REASONING_FORMATS = frozenset(get_args(ReasoningFormat))


def _reasoning(reasoning: Reasoning) -> Json:
    """Kept byte for byte: the provider's payload is a string inside the JSON, so its bytes
    (signatures included) come back exactly as they were stored."""
    return _compact(
        {
            "format": reasoning.format,
            "text": reasoning.text,
            "payload": reasoning.payload,
            "model": reasoning.model,
        }
    )


def _read_reasoning(raw: object) -> Reasoning | None:
    if not isinstance(raw, dict) or raw.get("format") not in _REASONING_FORMATS:
        return None  # a format this version does not know is not sent anywhere
    return Reasoning(
        format=raw["format"],
        text=str(raw.get("text", "")),
        payload=str(raw.get("payload", "")),
        model=str(raw.get("model", "")),
    )


def _list(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data.get(key)
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict)]


def _read_sender(raw: object) -> Sender | None:
    if not isinstance(raw, dict):
        return None
    kind = raw.get("kind", "user")
    return Sender(
        id=int(raw.get("id", 0)),
        name=str(raw.get("name", "")),
        username=_opt_str(raw.get("username")),
        is_bot=bool(raw.get("isBot", False)),
        kind=cast(SenderKind, kind if kind in _SENDER_KINDS else "user"),
        via_bot=_opt_str(raw.get("viaBot")),
    )


def _read_media(raw: Mapping[str, Any]) -> Media:
    kind = raw.get("kind", "other")
    return Media(
        kind=cast(MediaKind, kind if kind in _MEDIA_KINDS else "other"),
        duration=_opt_int(raw.get("duration")),
        file_name=_opt_str(raw.get("fileName")),
        emoji=_opt_str(raw.get("emoji")),
        file_id=_opt_str(raw.get("fileId")),
        title=_opt_str(raw.get("title")),
        detail=_opt_str(raw.get("detail")),
        value=_opt_int(raw.get("value")),
        file_unique_id=_opt_str(raw.get("fileUniqueId")),
        width=_opt_int(raw.get("width")),
        height=_opt_int(raw.get("height")),
        mime_type=_opt_str(raw.get("mimeType")),
        file_size=_opt_int(raw.get("fileSize")),
        transcript=_opt_str(raw.get("transcript")),
        closed=raw.get("closed") if isinstance(raw.get("closed"), bool) else None,
    )


def _read_quote(raw: object) -> Quote | None:
    if not isinstance(raw, dict) or raw.get("id") is None:
        return None
    return Quote(
        id=int(raw["id"]),
        sender_id=_opt_int(raw.get("senderId")),
        timestamp=_read_time(raw.get("timestamp")),
        summary=str(raw.get("summary", "")),
        truncated=bool(raw.get("truncated", False)),
        chat_id=_opt_int(raw.get("chatId")),
        fragment=bool(raw.get("fragment", False)),
        chat_name=_opt_str(raw.get("chatName")),
        forwarded_from=_opt_str(raw.get("forwardedFrom")),
        task=_opt_int(raw.get("task")),
        story=_opt_int(raw.get("story")),
    )


def _read_forward(raw: object) -> Forward | None:
    if not isinstance(raw, dict):
        return None
    return Forward(
        from_name=str(raw.get("fromName", "")),
        from_id=_opt_int(raw.get("fromId")),
        hidden=bool(raw.get("hidden", False)),
        date=_read_time(raw.get("date")),
    )


def _read_block(raw: Mapping[str, Any]) -> ContentBlock:
    if raw.get("type") == "contextRef":
        return ContentBlock(type="contextRef", text=str(raw.get("text", "")), key=_key(raw))
    return ContentBlock(type="text", text=str(raw.get("text", "")), key=_key(raw))


def _key(raw: Mapping[str, Any]) -> str | None:
    return _opt_str(raw.get("key"))


def _read_time(raw: object) -> datetime | None:
    if not isinstance(raw, str):
        return None
    value = datetime.fromisoformat(raw)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _opt_int(raw: object) -> int | None:
    return None if raw is None else int(cast(int, raw))


def _opt_str(raw: object) -> str | None:
    return None if raw is None else str(raw)
