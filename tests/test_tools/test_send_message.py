"""The send_message tool: an extra message in the chat, replying by alias, stored as the bot's."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from tests.fakes import BOB, RecordingMessenger
from tests.test_agent.rig import CHAT, make_app, say


async def test_send_message_replies_by_alias_and_records_its_bubble(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [CallTool("send_message", {"text": "ping Bob", "reply_to_message_id": "m1"}), Reply("ok")]
    )
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 71, "I'm Bob", sender=BOB)
    await say(app, clock, 72, "@Helper poke Bob for me", mentions_bot=True)

    extra = messenger.sent[0]
    assert (extra.text, extra.reply_to) == ("ping Bob", 71)
    event = await store.find_platform_message(CHAT, extra.message_id)
    assert event is not None
    assert (event.is_bot, event.sender_id, event.sender_name) == (True, 999, "Helper")
    assert messenger.texts(CHAT) == ["ping Bob", "ok"]
