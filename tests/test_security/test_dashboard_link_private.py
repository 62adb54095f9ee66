"""Finding 28.4: `/dashboard` typed by the owner in a group posted the link in the group
(a member who opened it got a 12-hour session). The link goes to the owner's private chat
only; the group is told a private message was sent; and the link works once (see
test_dashboard_hostile.py for the second visit)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from pydantic import SecretStr

from bot.domain.facts import InboundMessage, Sender
from bot.texts import text
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app

OWNER = Sender(id=42, name="Owner")
GROUP = -100_777


async def test_the_owners_dashboard_in_a_group_goes_to_their_private_chat(
    tmp_path: Path,
) -> None:
    messenger = RecordingMessenger()
    app = wire_app(
        rig_settings(
            tmp_path,
            owner_id=OWNER.id,
            dashboard_url="https://ops.example.org/",
            dashboard_token=SecretStr("dash-owner-secret-123456"),
        ),
        store=InMemoryStore(),
        messenger=messenger,
        clock=SteppingClock(datetime(2026, 11, 30, 6, 0, tzinfo=UTC)),
    )
    await app.inbound.on_message(
        InboundMessage(
            update_id=1,
            chat_id=GROUP,
            chat_type="supergroup",
            message_id=7,
            date=datetime(2026, 11, 30, 6, 0, tzinfo=UTC),
            sender=OWNER,
            text="/dashboard",
            command="dashboard",
        )
    )
    await app.inbound.drain()
    in_group = messenger.texts(GROUP)
    in_private = messenger.texts(OWNER.id)
    assert in_group == [text("en", "dashboard_sent_privately")]
    assert not any("token=" in sent for sent in in_group)
    assert len(in_private) == 1
    assert re.search(r"https://ops\.example\.org/\?token=\S+", in_private[0])
