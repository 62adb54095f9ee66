"""`build_bot`'s session over real HTTP against `FakeBotApi`: a call answered, plain HTTP
closed at once."""

from __future__ import annotations

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession

from adapters.telegram.bot_session import build_bot
from testkit.fake_bot_api import FakeBotApi


async def test_get_me_over_real_http(api: FakeBotApi, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (api.bot_id, "test_bot", True)


async def test_a_plain_http_session_closes_its_connections() -> None:
    """`build_bot`'s session over plain HTTP closes without aiogram's SSL grace period; what
    it opened is closed all the same (a leak would fail the suite under filterwarnings)."""
    async with FakeBotApi() as api:
        bot = build_bot(api.token, api.base_url)
        assert (await bot.get_me()).id == api.bot_id
        assert isinstance(bot.session, AiohttpSession)
        client = await bot.session.create_session()
        await bot.session.close()
        assert client.closed
        await bot.session.close()  # twice is harmless
