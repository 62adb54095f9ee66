"""Issue 48, `/settings` through `tgbot run`: a member who is no admin is refused; an admin
sees the effective settings and changes what `[chats] admin_may` allows, stored in the
database (read back by another worker); a change of the system prompt is said first and
applies only when confirmed."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.chat_scope import ChatScopes
from bot.clock import SystemClock
from bot.services.chat_settings import ChatSettingsBook
from storage.chat_settings import SqlChatSettings
from storage.engine import create_engine_for
from tests.bot_process import QUIET_CONFIG, StartBot, eventually

pytestmark = pytest.mark.slow

GROUP = -1003330000048
ADMIN = {"id": 2002, "is_bot": False, "first_name": "Ada"}
MEMBER = {"id": 1001, "is_bot": False, "first_name": "Bob"}
CONFIG = f"""{QUIET_CONFIG}
[chats]
admin_may = ["keywords", "persona"]
"""


async def test_settings_refuse_members_and_apply_an_admins_allowed_change(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel()
    api, _llm, bot, _store = await bot_running(model, config=CONFIG)
    api.set_admins(GROUP, {ADMIN["id"]})

    def say(sender: dict[str, object], text: str) -> None:
        api.push_update(api.user_message(GROUP, sender, text, chat_title="Team"))

    async def replies(count: int) -> list[str]:
        async def sent() -> bool:
            return len(api.calls_of("sendMessage")) >= count

        await eventually(sent)
        return [str(call["text"]) for call in api.calls_of("sendMessage")]

    say(MEMBER, "/settings keywords deploy")
    assert "Only the group's admins" in (await replies(1))[-1]
    say(ADMIN, "/settings")
    shown = (await replies(2))[-1]
    assert "keywords:  ✎" in shown
    assert "ambient: off\n" in shown  # shown, not changeable here
    say(ADMIN, "/settings ambient judge")
    assert "not one the owner lets admins change" in (await replies(3))[-1]
    say(ADMIN, "/settings keywords deploy, 部署")
    assert "keywords is now deploy, 部署" in (await replies(4))[-1]
    say(ADMIN, "/settings persona You are the team's release desk.")
    assert "system prompt" in (await replies(5))[-1]  # said first, not applied
    say(MEMBER, "shall we deploy now?")  # the new keyword starts a turn
    assert (await replies(6))[-1] == "Noted: shall we deploy now?"
    assert "release desk" not in str(model.requests[0].messages[0].content)
    say(ADMIN, "/settings persona You are the team's release desk. confirm")
    assert "persona is now You are the team's release desk." in (await replies(7))[-1]
    say(MEMBER, "部署好了吗")
    assert (await replies(8))[-1] == "Noted: 部署好了吗"
    assert str(model.requests[1].messages[0].content).endswith(
        "[Persona for this chat]\nYou are the team's release desk."
    )

    # another worker on the same database reads the change
    engine = create_engine_for(f"sqlite+aiosqlite:///{bot.data_dir / 'tgbot.sqlite3'}")
    try:
        scopes = ChatScopes()
        book = ChatSettingsBook(SqlChatSettings(engine), clock=SystemClock()).attach(scopes)
        await book.refresh()
        assert scopes.of(GROUP).triggers.keywords == ("deploy", "部署")
        assert scopes.of(GROUP).persona == "You are the team's release desk."
    finally:
        await engine.dispose()
