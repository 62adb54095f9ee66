"""Issue 50, item 6: `private_chats` covers a channel's direct-messages chats.

Such a chat has a group's negative id, but each of its topics is a one-to-one conversation
with the member who writes. Through the app rig with `private_chats = "owner"`: a member's
direct message is not answered (and costs no model call), the owner's is.
"""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, OWNER, RecordingMessenger, SteppingClock, inbound
from tests.rig import QUIET, rig_settings, wire_app
from tests.test_agent.rig import START

DIRECT = -1003330050  # the channel's direct-messages chat


async def test_private_chats_owner_covers_a_channels_direct_messages(tmp_path: Path) -> None:
    messenger = RecordingMessenger()
    model = ScriptedModel()
    security = {**QUIET["security"], "private_chats": "owner"}
    settings = rig_settings(tmp_path, owner_id=OWNER.id, security=security)
    clock = SteppingClock(START)
    app = wire_app(settings, store=InMemoryStore(), messenger=messenger, model=model, clock=clock)
    for mid, sender in ((1, ALICE), (2, OWNER)):
        clock.advance(40)
        message = inbound(
            chat_id=DIRECT, message_id=mid, text=f"@Helper hello from {sender.name}",
            sender=sender, at=clock.now(), mentions_bot=True, direct_messages=True,
        )  # fmt: skip
        await app.inbound.on_message(message)
        await app.inbound.drain()
    asked = [m.content for r in model.requests for m in r.messages if m.role == "user"]
    assert any("hello from Owner" in text for text in asked)
    assert not any("hello from Alice" in text for text in asked)
