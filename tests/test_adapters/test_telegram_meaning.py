"""Issue 24 items 5 and 7: what the text alone does not show reaches the model.

Links behind words carry their URL, text mentions their user id; names that show nothing
fall back to `@username`, else the id alone; invoices and payments carry their amount;
rich messages read as their text."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.telegram.message_parts import money
from bot.context.escaping import is_invisible
from bot.context.headers import HeaderWalker
from bot.domain.facts import InboundMessage, Media
from testkit.updates import parse_raw_update

GROUP = {"id": -1001234567890, "type": "supergroup", "title": "Team"}
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}


def parse(message: dict[str, Any]) -> InboundMessage:
    update = {
        "update_id": 1,
        "message": {"message_id": 5, "date": 1764600000, "chat": GROUP, "from": ALICE, **message},
    }
    parsed = parse_raw_update(update, bot_id=999, bot_username="test_bot", locale="en")
    assert parsed is not None
    return parsed


def test_a_text_link_shows_its_url_after_its_words() -> None:
    parsed = parse(
        {
            "text": "look here, then 😀 there",
            "entities": [
                {"type": "text_link", "offset": 0, "length": 9, "url": "https://example.com/a"},
                {"type": "bold", "offset": 11, "length": 4},
                {"type": "text_link", "offset": 19, "length": 5, "url": "https://example.com/b"},
            ],
        }
    )
    # offsets are UTF-16: the emoji counts two units
    assert parsed.text == (
        "look here <https://example.com/a>, then 😀 there <https://example.com/b>"
    )


def test_a_text_mention_shows_the_user_id_and_still_addresses_the_bot() -> None:
    parsed = parse(
        {
            "text": "Bob and Helper, look",
            "entities": [
                {"type": "text_mention", "offset": 0, "length": 3, "user": {
                    "id": 1002, "is_bot": False, "first_name": "Bob"}},
                {"type": "text_mention", "offset": 8, "length": 6, "user": {
                    "id": 999, "is_bot": True, "first_name": "Helper"}},
            ],
        }
    )  # fmt: skip
    assert parsed.text == "Bob (user_id:1002) and Helper (user_id:999), look"
    assert parsed.mentions_bot


def test_a_caption_link_carries_its_url() -> None:
    parsed = parse(
        {
            "photo": [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}],
            "caption": "the plan",
            "caption_entities": [
                {"type": "text_link", "offset": 4, "length": 4, "url": "https://x.example/p"}
            ],
        }
    )
    assert parsed.text == "the plan <https://x.example/p>"


@pytest.mark.parametrize("name", ["\u200e", "\u200e\u200b ", "\u3164", "\u2800\u2060"])
def test_an_invisible_name_falls_back_to_the_username(name: str) -> None:
    assert is_invisible(name)
    parsed = parse({"text": "hi", "from": {**ALICE, "first_name": name, "username": "ali"}})
    assert parsed.sender.name == "@ali"


def test_an_invisible_name_without_username_shows_only_the_user_id() -> None:
    parsed = parse({"text": "hi", "from": {**ALICE, "first_name": "\u200e"}})
    walker = HeaderWalker(zone=__import__("datetime").UTC, scene="group", bot_user_id=999)
    header = walker.header(ids=("m1",), at=parsed.date, sender=parsed.sender)
    assert header.startswith("[id:m1;user_id:1001;date:")
    assert "user:" not in header.replace("user_id:", "")


def test_visible_names_stay_as_they_are() -> None:
    assert not is_invisible("Ali\u200ece")
    assert not is_invisible("李")
    assert parse({"text": "hi"}).sender.name == "Alice"


def test_an_invoice_shows_its_amount() -> None:
    parsed = parse(
        {
            "invoice": {
                "title": "Pro plan",
                "description": "one month",
                "start_parameter": "pro",
                "currency": "USD",
                "total_amount": 1250,
            }
        }
    )
    assert parsed.media == (Media(kind="invoice", title="Pro plan", detail="12.50 USD"),)


def test_a_payment_shows_its_amount() -> None:
    parsed = parse(
        {
            "successful_payment": {
                "currency": "EUR",
                "total_amount": 999,
                "invoice_payload": "p",
                "telegram_payment_charge_id": "t",
                "provider_payment_charge_id": "p",
            }
        }
    )
    assert parsed.event == "Alice completed a payment (9.99 EUR)"


def test_money_knows_currencies_without_minor_units() -> None:
    assert money(500, "JPY") == "500 JPY"
    assert money(25, "XTR") == "25 XTR"
    assert money(5, "USD") == "0.05 USD"


def test_a_peer_bots_rich_message_reads_as_its_text() -> None:
    bot = {"id": 2002, "is_bot": True, "first_name": "Reporter", "username": "reporter_bot"}
    parsed = parse(
        {
            "from": bot,
            "rich_message": {
                "blocks": [
                    {"type": "heading", "text": "Weekly report", "size": 1},
                    {"type": "paragraph", "text": ["All ", {"type": "bold", "text": "green"}]},
                    {
                        "type": "table",
                        "cells": [
                            [
                                {"align": "left", "valign": "top", "text": "build"},
                                {"align": "left", "valign": "top", "text": "ok"},
                            ]
                        ],
                    },
                ]
            },
        }
    )
    assert parsed.text == "Weekly report\nAll green\nbuild\nok"
    assert parsed.media == ()
    assert parsed.sender.is_bot
