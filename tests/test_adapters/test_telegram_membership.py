"""`TelegramMessenger.is_chat_member` (`getChatMember`) through aiogram's real HTTP client
against `FakeBotApi`: who counts as in a group for `private_chats = "members"`."""

from __future__ import annotations

from aiogram import Bot

from adapters.telegram.sender import TelegramMessenger
from bot.services.private_members import ChatMembership
from testkit.fake_bot_api import FakeBotApi

GROUP = -1001234567890


async def test_members_admins_the_creator_and_restricted_members_count_and_others_do_not(
    api: FakeBotApi, bot: Bot
) -> None:
    api.set_members(GROUP, {1001}, restricted={1002})
    api.set_admins(GROUP, {1003}, creator=1004)
    messenger = TelegramMessenger(bot)
    assert isinstance(messenger, ChatMembership)
    verdicts = {user: await messenger.is_chat_member(GROUP, user) for user in range(1001, 1006)}
    assert verdicts == {1001: True, 1002: True, 1003: True, 1004: True, 1005: False}
    assert [int(c["user_id"]) for c in api.calls_of("getChatMember")] == list(range(1001, 1006))
