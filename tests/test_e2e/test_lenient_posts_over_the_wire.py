"""A post with one fact in an older shape, through `tgbot run`: the collectible gift of a
channel post recorded before `gift_id` existed (teloxide's fixture) is stored as the post it
is, and so is a payment in an older shape (both were skipped whole)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.ports import LLMResponse
from tests.bot_process import StartBot, eventually

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "telegram_updates"
GROUP = -1005550505


async def test_posts_with_an_older_fact_are_kept(bot_running: StartBot) -> None:
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    api, _llm, _process, store = await bot_running(model, BOT_LOCALE="en")
    fixture = json.loads(
        (CORPUS / "tlx_channel_post_unique_gift_without_gift_id.json").read_text(encoding="utf-8")
    )
    post = fixture["update"]["channel_post"]
    api.push_update({"channel_post": post})

    async def post_stored() -> bool:
        found = await store.find_platform_message(post["chat"]["id"], post["message_id"])
        return found is not None and "collectible gift" in found.text

    await eventually(post_stored)

    payment = api.user_message(GROUP, {"id": 1001, "first_name": "Alice"}, "")
    del payment["message"]["text"]
    payment["message"]["successful_payment"] = {  # before provider_payment_charge_id & co.
        "currency": "USD",
        "total_amount": 1250,
        "invoice_payload": "order-7",
    }
    api.push_update(payment)

    async def payment_stored() -> bool:
        found = await store.find_platform_message(GROUP, payment["message"]["message_id"])
        return found is not None and found.text == "Alice completed a payment (12.50 USD)"

    await eventually(payment_stored)
