"""Issue 51, item 8 through `tgbot run`: with `allowed_chats` set and `private_chats` left
unset, a stranger's private chat is refused (told once, nothing stored, no model call, one
`getChatMember`), a member seen in the allowed group is answered, and so is one that
`getChatMember` confirms. Item 5 too: each turn's log line names its trigger, and the last
line when it stops adds up the turns."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.domain.ids import SessionKey
from bot.texts import text
from tests.bot_process import QUIET_CONFIG, StartBot, reply_stored

pytestmark = pytest.mark.slow

GROUP = -1001110000051
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
CAROL = {"id": 1003, "is_bot": False, "first_name": "Carol"}
MALLORY = {"id": 6666, "is_bot": False, "first_name": "Mallory"}
CONFIG = QUIET_CONFIG.replace("[security]\n", f"[security]\nallowed_chats = [{GROUP}]\n")


async def test_strangers_are_refused_and_members_answered_in_private(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel()
    api, _llm, bot, store = await bot_running(model, config=CONFIG, BOT_LOCALE="en")
    api.set_members(GROUP, {ALICE["id"], CAROL["id"]})
    say = lambda chat, user, words, **kw: api.push_update(  # noqa: E731
        api.user_message(chat, user, words, chat_type="private", **kw)
    )

    say(MALLORY["id"], MALLORY, "hello, bot?")
    await api.wait_for_call("sendMessage", 1)
    (refusal,) = api.sent_messages(MALLORY["id"])
    assert refusal["text"] == text("en", "private_not_allowed", user_id=MALLORY["id"])

    api.push_update(api.user_message(GROUP, ALICE, "@test_bot hi all", chat_title="Team"))
    await reply_stored(api, store, GROUP, 1)
    say(ALICE["id"], ALICE, "a private question")
    await reply_stored(api, store, ALICE["id"], 1)

    for word in ("please", "answer", "me"):
        say(MALLORY["id"], MALLORY, word)
    say(CAROL["id"], CAROL, "I only read the group")  # confirmed by getChatMember
    await reply_stored(api, store, CAROL["id"], 1)

    asked = [str(request.messages[-1].content) for request in model.requests]
    assert len(asked) == 3
    assert not any("hello, bot?" in a or "please" in a for a in asked)
    assert len(api.sent_messages(MALLORY["id"])) == 1  # told once, then silence
    assert await store.find_session(SessionKey(chat_id=MALLORY["id"])) is None
    checked = [int(c["user_id"]) for c in api.calls_of("getChatMember")]
    assert checked.count(MALLORY["id"]) == 1  # four messages, one allowed group: one lookup
    assert checked.count(CAROL["id"]) == 1
    assert ALICE["id"] not in checked  # seen writing in the group: no lookup
    assert "private chats: members" in bot.log()

    # issue 51, item 5: the terminal says what the bot did, and what it did in all
    assert await bot.stop() == 0
    log = bot.log()
    assert f"chat {GROUP} (group) member {ALICE['id']} trigger mention; " in log
    assert f"chat {CAROL['id']} (private) member {CAROL['id']} trigger private; " in log
    assert "3 turn(s) handled (3 answered, 0 failed); tokens in " in log.splitlines()[-1]
    assert "stopped after " in log.splitlines()[-1]
    assert "private question" not in log  # no message text
