"""Facts no longer lost in parsing: a checklist's title in task lines, a suggested post's
price, state and refusal reason, and a message read leniently when one fact in it comes in
an older or newer shape (the rest of the post is kept)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram.lenient import lenient_update
from bot.context.placeholders import media_placeholder
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale
from testkit.updates import parse_raw_update

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "telegram_updates"
CHAT = {"id": -1001, "type": "supergroup", "title": "Mods"}
ALICE = {"id": 7, "is_bot": False, "first_name": "Alice"}


def corpus(name: str) -> dict[str, Any]:
    data = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return dict(data["update"])


def message(**fields: Any) -> dict[str, Any]:
    body = {"message_id": 42, "date": 1750000000, "chat": CHAT, "from": ALICE, **fields}
    return {"update_id": 1, "message": body}


def parse(update: dict[str, Any], locale: Locale = "en") -> InboundMessage:
    parsed = parse_raw_update(update, bot_id=5, bot_username="test_bot", locale=locale)
    assert parsed is not None
    return parsed


CHECKLIST_MESSAGE = {
    "message_id": 300,
    "date": 1700000000,
    "chat": CHAT,
    "checklist": {
        "title": "Launch",
        "tasks": [{"id": 1, "text": "Ship"}, {"id": 2, "text": "Tell"}],
    },
}


def test_checklist_lines_name_the_checklist_and_its_tasks() -> None:
    added = parse(
        message(
            checklist_tasks_added={
                "checklist_message": CHECKLIST_MESSAGE,
                "tasks": [{"id": 3, "text": "Celebrate"}],
            }
        )
    )
    assert added.event == 'Alice added tasks to the checklist "Launch": Celebrate'
    done = parse(
        message(
            checklist_tasks_done={
                "checklist_message": CHECKLIST_MESSAGE,
                "marked_as_done_task_ids": [1],
                "marked_as_not_done_task_ids": [2],
            }
        ),
        "zh",
    )
    assert (
        done.event == "Alice 将任务 #1 Ship 标为完成，将任务 #2 Tell 标为未完成（清单「Launch」）"
    )


POST = {"message_id": 40, "date": 1750000000, "chat": CHAT, "text": "Buy our course"}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {
                "suggested_post_approved": {
                    "suggested_post_message": POST,
                    "price": {"currency": "TON", "amount": 1_500_000_000},
                    "send_date": 1750003600,
                }
            },
            'Alice approved a suggested post "Buy our course" (1.5 TON)',
        ),
        (
            {"suggested_post_approval_failed": {"price": {"currency": "XTR", "amount": 250}}},
            "a suggested post could not be approved (250 stars): the payment failed",
        ),
        (
            {"suggested_post_declined": {"suggested_post_message": POST, "comment": "no ads"}},
            'Alice declined a suggested post "Buy our course"; the reason: no ads',
        ),
        (
            {"suggested_post_refunded": {"reason": "post_deleted"}},
            "a suggested post was refunded: the post was deleted",
        ),
        (
            {"suggested_post_paid": {"currency": "TON", "amount": 2_000_000_000}},
            "a suggested post was paid for (2 TON)",
        ),
    ],
    ids=["approved", "approval-failed", "declined", "refunded", "paid-ton"],
)
def test_suggested_post_lines_keep_price_and_reason(fields: dict[str, Any], expected: str) -> None:
    assert parse(message(**fields)).event == expected


def test_a_suggested_posts_state_and_price_ride_with_it() -> None:
    parsed = parse(corpus("cry_suggested_post_info_pending"))
    assert parsed.text == "hello"
    (fact,) = parsed.media
    assert media_placeholder(fact, "en") == "[suggested post pending, 100 stars]"
    assert media_placeholder(
        parse(corpus("cry_suggested_post_info_pending"), "zh").media[0], "zh"
    ) == ("[投稿 待审核, 100 星]")


def test_an_older_unique_gift_keeps_the_channel_post() -> None:
    update = corpus("tlx_channel_post_unique_gift_without_gift_id")
    parsed = parse(update)
    assert parsed.chat_type == "channel"
    assert parsed.event == "Collectors sent the collectible gift name #123"


def test_a_fact_that_cannot_be_repaired_is_left_out_and_the_words_kept() -> None:
    update = message(
        text="@test_bot did you get my payment?",
        entities=[{"type": "mention", "offset": 0, "length": 9}],
        successful_payment="paid!",
    )
    parsed = parse(update)
    assert parsed.text == "@test_bot did you get my payment?"
    assert parsed.mentions_bot
    assert parsed.event is None


def test_an_older_payment_is_read_with_its_amount() -> None:
    update = message(
        successful_payment={"currency": "USD", "total_amount": 1250, "invoice_payload": "p1"}
    )
    assert parse(update).event == "Alice completed a payment (12.50 USD)"


def test_the_message_itself_must_validate() -> None:
    broken = message(text="hi")
    del broken["message"]["chat"]
    assert lenient_update(broken) is None
    assert lenient_update({"update_id": 1, "poll": {"id": "x"}}) is None


def test_repairs_never_touch_the_original() -> None:
    update = corpus("tlx_channel_post_unique_gift_without_gift_id")
    kept = copy.deepcopy(update)
    assert lenient_update(update) is not None
    assert update == kept
