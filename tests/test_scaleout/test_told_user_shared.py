"""`[Already told the user]` across workers (`storage.told_notes`): a command answered by one
worker is told to the next turn in that chat on the other, once; a failed turn leaves them for
the next one (as in one process); `context show` reads them; and the table keeps only a
chat's newest lines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.llm.scripted import Fail, ScriptedModel, is_summary_request
from bot.app.context_show import preview_request
from bot.app.wiring import App
from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.errors import ProviderUnavailable
from bot.services.told_lines import told_line
from bot.texts import text
from storage.engine import create_engine_for
from storage.sql import SqlStore
from storage.told_notes import MAX_LINES, SqlToldNotes
from tests.fakes import RecordingMessenger, inbound
from tests.rig import rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

TOLD = "[Already told the user]"
GROUP = -100800
ALICE = Sender(id=1001, name="Alice")
AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[tuple[list[App], ScriptedModel]]:
    url = await fresh_postgres()
    model = ScriptedModel()
    apps = [
        wire_app(
            rig_settings(tmp_path / f"w{n}", database_url=url),
            store=SqlStore(create_engine_for(url)),
            messenger=RecordingMessenger(next_id=10_000 * (n + 1)),
            model=model,
        )
        for n in range(2)
    ]
    try:
        yield apps, model
    finally:
        for app in apps:
            await app.inbound.drain()
            await app.routes.aclose()
            await app.store.close()


async def test_a_command_answered_on_one_worker_is_told_to_the_next_turn_on_the_other(
    workers: tuple[list[App], ScriptedModel],
) -> None:
    (a, b), model = workers
    await a.inbound.on_message(
        inbound(chat_id=GROUP, message_id=1, text="/help", command="help", sender=ALICE, at=AT)
    )
    for n, app in ((2, b), (3, a)):
        await app.inbound.on_message(
            inbound(
                chat_id=GROUP, message_id=n, text=f"@helper_bot {n}", mentions_bot=True,
                sender=ALICE, at=AT,
            )
        )  # fmt: skip
        await app.inbound.drain()
    first, second = [r for r in model.requests if not is_summary_request(r)]
    assert f"{TOLD}\n- {told_line(text('en', 'help'))}" in first.messages[-1].content
    assert all(TOLD not in m.content for m in second.messages)  # told once, on either worker


async def test_a_chat_keeps_its_newest_lines_and_a_read_is_forgotten_only_when_confirmed(
    workers: tuple[list[App], ScriptedModel],
) -> None:
    (a, b), _model = workers
    assert isinstance(a.store, SqlStore)
    assert isinstance(b.store, SqlStore)
    one, two = SqlToldNotes(a.store.engine), SqlToldNotes(b.store.engine)
    for n in range(MAX_LINES + 3):
        await (one, two)[n % 2].note(GROUP, 0, f"line {n}")
    taken = await two.take(GROUP, 0)
    assert taken.lines == tuple(f"line {n}" for n in range(3, MAX_LINES + 3))
    assert taken.upto is not None
    await one.note(GROUP, 0, "while the turn ran")
    assert (await one.take(GROUP, 0)).lines[-1] == "while the turn ran"  # not confirmed yet
    await one.confirm(GROUP, 0, taken.upto)
    assert (await two.take(GROUP, 0)).lines == ("while the turn ran",)
    assert (await two.take(GROUP, 7)).lines == ()  # another thread of the chat


async def test_a_failed_turn_keeps_the_shared_notes_and_its_notice_joins_them(
    tmp_path: Path,
) -> None:
    """As in one process: a note is forgotten only once a turn that carried it is answered."""
    url = await fresh_postgres()
    model = ScriptedModel([Fail(ProviderUnavailable("down"))])
    messenger = RecordingMessenger()
    app = wire_app(
        rig_settings(tmp_path, database_url=url), store=SqlStore(create_engine_for(url)),
        messenger=messenger, model=model,
    )  # fmt: skip
    try:
        await app.inbound.on_message(
            inbound(chat_id=GROUP, message_id=1, text="/help", command="help", sender=ALICE, at=AT)
        )
        for n in (2, 3, 4):
            await app.inbound.on_message(
                inbound(
                    chat_id=GROUP, message_id=n, text=f"@helper_bot {n}", mentions_bot=True,
                    sender=ALICE, at=AT,
                )
            )  # fmt: skip
            await app.inbound.drain()
        failed, answered, after = [
            r.messages[-1].content for r in model.requests if not is_summary_request(r)
        ]
        help_line = f"- {told_line(text('en', 'help'))}"
        assert help_line in failed
        notice = told_line(messenger.sent[1].text)  # /help, the failure notice, two replies
        assert help_line in answered
        assert f"- {notice}" in answered
        assert TOLD not in after  # forgotten once a turn carrying them was answered
        # `tgbot context show` (and the dashboard) read the same table, without confirming
        await app.told.note(GROUP, 0, "Daily summary: 3 messages yesterday")
        assert isinstance(app.store, SqlStore)
        session = await app.store.find_session(SessionKey(chat_id=GROUP))
        assert session is not None
        settings = rig_settings(tmp_path / "cli", database_url=url)
        for _ in range(2):
            preview = await preview_request(settings, app.store, session.key)
            assert "- Daily summary: 3 messages yesterday" in preview.text
    finally:
        await app.inbound.drain()
        await app.routes.aclose()
        await app.store.close()
