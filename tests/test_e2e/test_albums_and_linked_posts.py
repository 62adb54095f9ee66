"""Issue 24 items 4 and 6 through `tgbot run`: the parts of an album share `album:` with the
alias of the first part, and the linked channel's automatic forward says where it came
from (`origin:linked_channel;`), in the request the model is sent."""

from __future__ import annotations

import time
from typing import Any

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from tests.bot_process import StartBot, reply_stored

pytestmark = pytest.mark.slow

GROUP = -1009876500224
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
CHAT = {"id": GROUP, "type": "supergroup", "title": "Team"}
CHANNEL = {"id": -1001500000001, "type": "channel", "title": "Team news"}


def photo(message_id: int, group: str, caption: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "message_id": message_id,
        "from": ALICE,
        "chat": CHAT,
        "date": int(time.time()),
        "media_group_id": group,
        "photo": [{"file_id": f"p{message_id}", "file_unique_id": f"u{message_id}",
                   "width": 1280, "height": 960, "file_size": 120000}],
    }  # fmt: skip
    if caption is not None:
        message["caption"] = caption
    return {"message": message}


def linked_post(message_id: int) -> dict[str, Any]:
    """The shape Telegram gives a channel post forwarded into its discussion group."""
    return {
        "message": {
            "message_id": message_id,
            "from": {"id": 777000, "is_bot": False, "first_name": "Telegram"},
            "sender_chat": CHANNEL,
            "chat": CHAT,
            "date": int(time.time()),
            "is_automatic_forward": True,
            "forward_origin": {"type": "channel", "chat": CHANNEL, "message_id": 42,
                               "date": int(time.time())},
            "forward_from_chat": CHANNEL,
            "forward_from_message_id": 42,
            "forward_date": int(time.time()),
            "text": "Release 2.0 is out",
        }
    }  # fmt: skip


async def test_album_parts_share_the_first_alias_and_linked_posts_say_so(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel([Reply("nice pictures")])
    api, _llm, _bot, store = await bot_running(model)
    api.push_update(linked_post(100))
    api.push_update(photo(101, "13598766281537700", caption="our offsite"))
    api.push_update(photo(102, "13598766281537700"))
    api.push_update(photo(103, "13598766281537700"))
    api.push_update(api.user_message(GROUP, ALICE, "@test_bot what do you see?", chat_title="Team"))
    await reply_stored(api, store, GROUP, 1)

    content = "\n".join(str(m.content) for m in model.requests[0].messages)
    lines = [line for line in content.splitlines() if line.startswith("[id:")]
    assert lines[0].startswith("[id:m1;user:Team news;user_id:-1001500000001;")
    assert "origin:linked_channel;" in lines[0]
    assert lines[1].startswith("[id:m2;user:Alice;user_id:1001;")
    assert lines[1].endswith("album:m2;]")
    assert lines[2] == "[id:m3;user_id:1001;album:m2;]"
    assert lines[3] == "[id:m4;user_id:1001;album:m2;]"
    assert "album:" not in lines[4]
    system = str(model.requests[0].messages[0].content)
    assert "album:m12;" in system
    assert "origin:linked_channel;" in system
