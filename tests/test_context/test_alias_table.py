from __future__ import annotations

import pytest

from bot.context.alias_table import AliasTable
from bot.errors import ReferenceNotConfirmed

CHAT = -100


@pytest.fixture
def table() -> AliasTable:
    table = AliasTable()
    for alias, message_id in [("m3", 3003), ("m7", 7001), ("m7.3", 7003), ("m12", 12000)]:
        table.register(alias, message_id)
    table.register_reference(555)
    return table


@pytest.mark.parametrize(
    ("reference", "expected"),
    [("m12", 12000), ("m7.3", 7003), ("M7", 7001), (" m3 ", 3003), ("12000", 12000)],
    ids=["alias", "part-alias", "upper-case", "padded", "shown-id-as-digits"],
)
def test_resolve(table: AliasTable, reference: str, expected: int) -> None:
    assert table.resolve(reference) == expected


@pytest.mark.parametrize(
    "reference",
    ["m99", "m7.2", "unknown", "555", "4242", "ref-1", "", "m", "m7.3.1"],
    ids=[
        "never-shown",
        "unconfirmed-slot",
        "unknown-literal",
        "quote-id-is-reference-only",
        "foreign-id",
        "free-text",
        "empty",
        "bare-m",
        "too-deep",
    ],
)
def test_resolve_refuses(table: AliasTable, reference: str) -> None:
    with pytest.raises(ReferenceNotConfirmed) as caught:
        table.resolve(reference)
    assert caught.value.reference == reference


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"text": "hi m3", "reply_to_message_id": "m3"},
            {"text": "hi m3", "reply_to_message_id": 3003},
        ),
        ({"message_id": "m7.3"}, {"message_id": 7003}),
        ({"message_ids": ["m7", "m7.3", 12000]}, {"message_ids": [7001, 7003, 12000]}),
        ({"messageId": "m12", "emoji": "👍"}, {"messageId": 12000, "emoji": "👍"}),
        ({"reference": "m3", "depth": 1}, {"reference": 3003, "depth": 1}),
        ({"reference": 555}, {"reference": 555}),
        ({"reference": "555"}, {"reference": 555}),
        ({"message_id": None}, {"message_id": None}),
        (
            {
                "segments": [
                    {"type": "text", "text": "m3"},
                    {"type": "reply", "message_id": "m12"},
                    {"type": "reply", "id": "m7"},
                    {"type": "reply", "data": {"id": "m7.3"}},
                ]
            },
            {
                "segments": [
                    {"type": "text", "text": "m3"},
                    {"type": "reply", "message_id": 12000},
                    {"type": "reply", "id": 7001},
                    {"type": "reply", "data": {"id": 7003}},
                ]
            },
        ),
        (
            {"outer": {"inner": [{"target_message_id": "m3"}]}},
            {"outer": {"inner": [{"target_message_id": 3003}]}},
        ),
        ({"id": "m3", "count": 2}, {"id": "m3", "count": 2}),
    ],
    ids=[
        "reply-to-suffix-key",
        "part-alias",
        "list-mixed",
        "camel-case",
        "reference-alias",
        "reference-quoted-id",
        "reference-quoted-id-digits",
        "none-stays",
        "reply-segments",
        "deeply-nested",
        "id-outside-reply-segment-untouched",
    ],
)
def test_rewrite_arguments(
    table: AliasTable, arguments: dict[str, object], expected: dict[str, object]
) -> None:
    assert table.rewrite_arguments(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "refused"),
    [
        ({"message_id": "m99"}, "m99"),
        ({"message_id": "unknown"}, "unknown"),
        ({"message_ids": ["m7", "m7.2"]}, "m7.2"),
        ({"message_id": 555}, "555"),
        ({"message_id": 4242}, "4242"),
        ({"segments": [{"type": "reply", "message_id": "m1"}]}, "m1"),
        ({"message_id": True}, "True"),
        ({"reference": 4242}, "4242"),
    ],
    ids=[
        "unknown-alias",
        "unknown-slot",
        "unconfirmed-slot-in-list",
        "quoted-id-only-for-reference",
        "int-never-shown",
        "nested-segment",
        "bool",
        "reference-never-shown",
    ],
)
def test_rewrite_refuses(table: AliasTable, arguments: dict[str, object], refused: str) -> None:
    with pytest.raises(ReferenceNotConfirmed) as caught:
        table.rewrite_arguments(arguments)
    assert caught.value.reference == refused


def test_first_registration_wins() -> None:
    table = AliasTable()
    table.register("m1", 10)
    table.register("m1", 11)
    assert table.resolve("m1") == 10
