"""Issue 24 item 3 through `tgbot run`: a forum topic's name reaches the model, the reply
and the chat action go to the topic's thread, and a rename is followed."""

from __future__ import annotations

import asyncio
import time

import pytest

from adapters.llm.scripted import Hold, Reply, ScriptedModel
from bot.domain.ids import SessionKey
from tests.bot_process import StartBot, eventually, reply_stored
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

FORUM = -1009876500324
THREAD = 77
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
CHAT = {"id": FORUM, "type": "supergroup", "title": "Dev Forum", "is_forum": True}


def topic_event(message_id: int, field: str, name: str) -> dict[str, object]:
    """A topic's creation or rename, as Telegram sends it in the topic's thread."""
    return {
        "message": {
            "message_id": message_id,
            "from": ALICE,
            "chat": CHAT,
            "date": int(time.time()),
            "message_thread_id": THREAD,
            "is_topic_message": True,
            field: {"name": name, "icon_color": 7322096}
            if field == "forum_topic_created"
            else {"name": name},
        }
    }


async def test_the_topic_name_is_in_the_turn_context_and_the_reply_in_its_thread(
    bot_running: StartBot,
) -> None:
    release = asyncio.Event()  # the first answer waits until "typing…" has shown
    model = ScriptedModel([Hold(release, Reply("Friday works")), Reply("still Friday")])
    api, _llm, _bot, store = await bot_running(model)
    api.push_update(topic_event(THREAD, "forum_topic_created", "Release planning"))
    api.push_update(
        api.user_message(
            FORUM, ALICE, "@test_bot when do we ship?", chat_title="Dev Forum", thread_id=THREAD
        )
    )
    await api.wait_for_call("sendChatAction", 1, timeout=deadline(EVENT))
    release.set()
    await reply_stored(api, store, FORUM, 1)
    api.push_update(topic_event(THREAD + 50, "forum_topic_edited", "Release 2.0"))

    async def renamed() -> bool:
        session = await store.find_session(SessionKey(chat_id=FORUM, thread_id=THREAD))
        return session is not None and session.title == "Release 2.0"

    await eventually(renamed)
    api.push_update(
        api.user_message(
            FORUM, ALICE, "@test_bot still on?", chat_title="Dev Forum", thread_id=THREAD
        )
    )
    await reply_stored(api, store, FORUM, 2)

    first, second = (str(r.messages[-1].content) for r in model.requests[:2])
    assert "\nscene: group\ntopic: Release planning\n" in first
    assert "\ntopic: Release 2.0\n" in second
    for sent in api.calls_of("sendMessage"):
        assert sent["message_thread_id"] == THREAD
    actions = api.calls_of("sendChatAction")
    assert actions
    assert all(action["message_thread_id"] == THREAD for action in actions)
