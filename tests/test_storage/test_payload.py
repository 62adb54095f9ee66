"""The JSON payload mapping: round trips, platform ids, runtime fields, tolerance."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.domain.facts import Media, Quote, Sender
from bot.domain.messages import Reasoning, ToolCall
from bot.domain.records import AssistantRecord, RecordBody, SummaryRecord, UserRecord
from storage.payload import (
    PayloadError,
    decode_media,
    decode_payload,
    encode_media,
    encode_payload,
    with_message_ids,
)

ANN = Sender(id=2**40, name="安", is_bot=True, kind="bot")


@pytest.mark.parametrize(
    ("body", "ids"),
    [
        (
            UserRecord(
                sender=ANN,
                text="你好",
                quote=Quote(id=9, timestamp=datetime(2026, 1, 1, tzinfo=UTC)),
            ),
            (2**35,),
        ),
        (UserRecord(sender=ANN, text="[Tool results]\nok", legacy=True), ()),
        (
            UserRecord(
                sender=ANN,
                text="sudah?",
                quote=Quote(id=5, summary="Telur", fragment=True, task=2),
                paid_stars=50,
            ),
            (12,),
        ),
        (
            UserRecord(
                sender=ANN,
                text="test",
                quote=Quote(id=0, chat_id=-1003, chat_name="Stories", summary="[story]", story=4),
            ),
            (2,),
        ),
        (AssistantRecord(text="long"), (5, None, 7)),
        (SummaryRecord(text="s"), ()),
        (
            AssistantRecord(
                tool_calls=(ToolCall(id="toolu_1", name="f"),),
                reasoning=Reasoning(
                    format="anthropic",
                    text="想一想",
                    payload='[{"type": "thinking", "thinking": "想一想", "signature": "Eq+/="}]',
                    model="claude-opus-4-7",
                ),
            ),
            (),
        ),
    ],
    ids=[
        "user",
        "legacy user row",
        "checklist task reply, paid",
        "story reply",
        "multi-bubble",
        "no-ids",
        "tool call with its thinking",
    ],
)
def test_round_trip(body: RecordBody, ids: tuple[int | None, ...]) -> None:
    payload = encode_payload(body, ids)
    assert decode_payload(payload) == (body, ids)


def test_only_a_legacy_row_carries_the_legacy_mark() -> None:
    member = json.loads(encode_payload(UserRecord(sender=ANN, text="[Turn context] hi"), ()))
    imported = json.loads(encode_payload(UserRecord(sender=ANN, text="hi", legacy=True), ()))
    assert "legacy" not in member
    assert imported["legacy"] is True


def test_payload_carries_message_id_and_slots() -> None:
    data = json.loads(encode_payload(AssistantRecord(text="x"), (None, 11, 12)))
    assert (data["kind"], data["messageId"], data["messageIds"]) == (
        "assistant",
        11,
        [None, 11, 12],
    )


def test_runtime_fields_are_stripped_and_unknown_keys_ignored() -> None:
    stored = json.dumps(
        {"kind": "summary", "text": "t", "aliasSeq": 4, "aliasParts": ["m4"], "future": {"x": 1}}
    )
    assert decode_payload(stored) == (SummaryRecord(text="t"), ())
    rewritten = json.loads(with_message_ids(stored, [None, 3]))
    assert "aliasSeq" not in rewritten
    assert "aliasParts" not in rewritten
    assert (rewritten["messageId"], rewritten["messageIds"], rewritten["future"]) == (
        3,
        [None, 3],
        {"x": 1},
    )


def test_a_legacy_row_with_only_message_id_reads_as_one_slot() -> None:
    legacy = json.dumps(
        {
            "kind": "user",
            "messageId": 42,
            "sender": {"id": 1, "name": "A"},
            "blocks": [
                {"type": "text", "text": "hi"},
                {"type": "contextRef", "key": "workspace-rules"},
            ],
        }
    )
    body, ids = decode_payload(legacy)
    assert ids == (42,)
    assert isinstance(body, UserRecord)
    assert [b.key for b in body.blocks] == [None, "workspace-rules"]


@pytest.mark.parametrize("payload", ["[]", "{", '{"kind": "nope"}'], ids=["list", "broken", "kind"])
def test_unreadable_payloads_raise(payload: str) -> None:
    with pytest.raises(PayloadError):
        decode_payload(payload)


def test_media_round_trip_and_unknown_kind() -> None:
    media = (Media(kind="voice", duration=3), Media(kind="sticker", emoji="😀"))
    assert decode_media(encode_media(media)) == media
    assert decode_media('[{"kind": "hologram"}]') == (Media(kind="other"),)


def test_reasoning_of_a_format_this_version_does_not_know_is_dropped() -> None:
    """A newer version's reasoning read by an older one is not sent to any provider."""
    payload = encode_payload(
        AssistantRecord(text="hi", reasoning=Reasoning(format="reasoning")), ()
    )
    data = json.loads(payload)
    data["reasoning"]["format"] = "future"
    body, _ = decode_payload(json.dumps(data))
    assert body == AssistantRecord(text="hi")
