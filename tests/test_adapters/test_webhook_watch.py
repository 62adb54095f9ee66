"""With a webhook, `/healthz` answers 503 with Telegram's own words while `getWebhookInfo`
reports a recent delivery error, and 200 again once the deliveries are clean."""

from __future__ import annotations

import asyncio
import time

import aiohttp
from aiogram import Dispatcher

from adapters.telegram.bot_session import build_bot
from adapters.telegram.update_health import UpdateHealth
from adapters.telegram.webhook import HEALTH_PATH, WebhookServer
from adapters.telegram.webhook_watch import watch_webhook
from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline

REFUSED = "Wrong response from the webhook: 502 Bad Gateway"


async def test_telegram_reporting_delivery_errors_makes_the_webhook_health_fail() -> None:
    health = UpdateHealth(stall_seconds=600, source="getWebhookInfo", notify=lambda s: True)
    stop = asyncio.Event()
    async with FakeBotApi() as api, aiohttp.ClientSession() as http:
        api.webhook_url = "https://bot.example.org/telegram/webhook"
        api.webhook_error = (int(time.time()) - 20, REFUSED)
        bot = build_bot(api.token, api.base_url)
        server = WebhookServer(Dispatcher(), bot, secret=None, port=0, health=health)
        await server.start()
        watcher = asyncio.create_task(watch_webhook(bot, health, stop=stop, every_seconds=0.05))
        url = f"http://127.0.0.1:{server.port}{HEALTH_PATH}"

        async def status() -> tuple[int, object]:
            async with http.get(url) as answer:
                return answer.status, (await answer.json()).get("status")

        async def until(code: int) -> tuple[int, object]:
            async with asyncio.timeout(deadline(EVENT)):
                while (found := await status())[0] != code:
                    await api.wait_for_call(
                        "getWebhookInfo", len(api.calls_of("getWebhookInfo")) + 1
                    )
            return found

        try:
            assert await until(503) == (503, f"Telegram reports webhook delivery errors: {REFUSED}")
            api.webhook_error = (int(time.time()) - 3600, REFUSED)  # an hour old: not recent
            assert await until(200) == (200, None)
        finally:
            stop.set()
            await watcher
            await server.stop()
            await bot.session.close()
