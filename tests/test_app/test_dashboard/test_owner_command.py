"""The owner's `/dashboard`: a short-lived signed link when DASHBOARD_URL is set, otherwise
how to set it; everyone else is refused like for every owner command."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.app.dashboard.auth import LINK_SECONDS, verify
from bot.domain.facts import InboundMessage, Sender
from bot.texts import text
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app

OWNER_ID = 42
OWNER = Sender(id=OWNER_ID, name="Owner")
SECRET = "dash-owner-secret-123456"


async def ask(tmp_path: Path, sender: Sender = OWNER, **settings: Any) -> list[str]:
    messenger = RecordingMessenger()
    app = wire_app(
        rig_settings(tmp_path, owner_id=OWNER_ID, bot_locale="en", **settings),
        store=InMemoryStore(),
        messenger=messenger,
        clock=SteppingClock(datetime(2026, 11, 30, 6, 0, tzinfo=UTC)),
    )
    await app.inbound.on_message(
        InboundMessage(
            update_id=1,
            chat_id=sender.id,
            chat_type="private",
            message_id=1,
            date=datetime(2026, 11, 30, 6, 0, tzinfo=UTC),
            sender=sender,
            text="/dashboard",
            command="dashboard",
        )
    )
    await app.inbound.drain()
    return [m.text for m in messenger.sent]


async def test_the_owner_gets_a_signed_link_that_expires(tmp_path: Path) -> None:
    (reply,) = await ask(
        tmp_path, dashboard_url="https://ops.example.org/bot", dashboard_token=SecretStr(SECRET)
    )
    found = re.search(r"https://ops\.example\.org/bot/\?token=(\S+)", reply)
    assert found is not None, reply
    assert SECRET not in reply
    token = found.group(1)
    assert verify(SECRET, "link", token, now=time.time())
    assert not verify(SECRET, "link", token, now=time.time() + LINK_SECONDS + 1)


async def test_without_a_url_the_owner_is_told_how_to_set_it(tmp_path: Path) -> None:
    assert await ask(tmp_path) == [text("en", "dashboard_unset")]
    assert "DASHBOARD_URL" in text("en", "dashboard_unset")


async def test_without_a_token_the_link_is_the_plain_address(tmp_path: Path) -> None:
    (reply,) = await ask(tmp_path, dashboard_url="http://127.0.0.1:8080")
    assert reply.endswith("http://127.0.0.1:8080/")


async def test_members_are_refused(tmp_path: Path) -> None:
    replies = await ask(
        tmp_path,
        sender=Sender(id=666, name="Owner"),
        dashboard_url="https://ops.example.org",
        dashboard_token=SecretStr(SECRET),
    )
    assert replies == [text("en", "owner_only")]
