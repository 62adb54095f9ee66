"""`/settings` on two workers of one PostgreSQL database: a member who is no admin is refused
on either; an admin's allowed change made through one worker holds on the other once its
copy is stale (a few seconds), and a setting the owner did not allow is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel, is_summary_request
from bot.app.wiring import App
from bot.domain.facts import Sender
from bot.services.chat_settings import REFRESH_SECONDS
from storage.engine import create_engine_for
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

GROUP = -100802
ADMIN = Sender(id=2002, name="Ada")
MEMBER = Sender(id=1001, name="Bob")


@pytest.fixture
async def workers(
    tmp_path: Path,
) -> AsyncIterator[tuple[list[App], list[RecordingMessenger], ScriptedModel, SteppingClock]]:
    url = await fresh_postgres()
    model = ScriptedModel()
    clock = SteppingClock()
    messengers = [
        RecordingMessenger(next_id=10_000 * (n + 1), admins={GROUP: {ADMIN.id}}) for n in range(2)
    ]
    apps = [
        wire_app(
            rig_settings(tmp_path / f"w{n}", database_url=url, chats={"admin_may": ["keywords"]}),
            store=SqlStore(create_engine_for(url)),
            messenger=messengers[n],
            model=model,
            clock=clock,
        )
        for n in range(2)
    ]
    try:
        yield apps, messengers, model, clock
    finally:
        for app in apps:
            await app.inbound.drain()
            await app.routes.aclose()
            await app.store.close()


async def test_an_admins_change_on_one_worker_holds_on_the_other(
    workers: tuple[list[App], list[RecordingMessenger], ScriptedModel, SteppingClock],
) -> None:
    (a, b), (sent_a, sent_b), model, clock = workers
    ids = iter(range(1, 100))

    async def say(app: App, sender: Sender, text: str) -> None:
        command = text[1:].split()[0] if text.startswith("/") else None
        await app.inbound.on_message(
            inbound(
                chat_id=GROUP,
                message_id=next(ids),
                sender=sender,
                text=text,
                at=clock.now(),
                command=command,
            )
        )
        await app.inbound.drain()

    def turns() -> int:
        return len([r for r in model.requests if not is_summary_request(r)])

    await say(b, MEMBER, "/settings keywords deploy")
    assert "Only the group's admins" in sent_b.sent[-1].text
    await say(a, ADMIN, "/settings ambient judge")
    assert "not one the owner lets admins change" in sent_a.sent[-1].text
    await say(b, MEMBER, "shall we deploy now?")  # no keyword yet: stored, not answered
    assert turns() == 0

    await say(a, ADMIN, "/settings keywords deploy")
    assert "keywords is now deploy" in sent_a.sent[-1].text
    clock.advance(REFRESH_SECONDS + 1)  # worker b's copy of the settings is now stale
    model.add(Reply("On it."))
    await say(b, MEMBER, "shall we deploy now?")
    assert turns() == 1
    assert sent_b.sent[-1].text == "On it."
    await say(b, MEMBER, "the deployment went fine")  # a near miss: not the whole word
    assert turns() == 1
