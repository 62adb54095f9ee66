"""Start-up recovery policy (`InboundService.recover_interrupted`) over the in-memory store:
which interrupted turns are answered, which get a short notice, which are left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.config import load_settings
from bot.domain.facts import Quote, Sender
from bot.domain.ids import Scene, SessionKey
from bot.domain.records import UserRecord
from bot.ports import NewRecord
from bot.texts import text
from storage.memory import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import BOT_ID, wire_app

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ALICE = Sender(id=1001, name="Alice")


async def recover_one(
    tmp_path: Path, *, scene: Scene, text: str, age: timedelta, quote: Quote | None = None
) -> tuple[RecordingMessenger, ScriptedModel]:
    model = ScriptedModel([Reply("Answered after the restart.")])
    messenger = RecordingMessenger()
    store = InMemoryStore()
    app = wire_app(
        load_settings(data_dir=tmp_path, bot_locale="en"),
        store=store, messenger=messenger, model=model, clock=SteppingClock(NOW),
    )  # fmt: skip
    chat = -100 if scene == "group" else ALICE.id
    session = await store.open_session(SessionKey(chat_id=chat), scene=scene)
    body = UserRecord(sender=ALICE, text=text, quote=quote)
    await store.append(session.id, [NewRecord(body=body, created_at=NOW - age, message_ids=(7,))])
    await app.inbound.recover_interrupted(bot_id=BOT_ID, bot_username="helper_bot")
    await app.inbound.drain()
    return messenger, model


ANSWER = ["Answered after the restart."]
MISSED = [text("en", "restarted_missed")]
CASES = {
    "private, 2 min ago: answered": ("private", "hi", timedelta(minutes=2), None, ANSWER),
    "private, 1 h ago: told to ask again": ("private", "hi", timedelta(hours=1), None, MISSED),
    "private, 2 days ago: left alone": ("private", "hi", timedelta(days=2), None, []),
    "group mention: answered": ("group", "hey @Helper_Bot?", timedelta(minutes=1), None, ANSWER),
    "group reply to the bot: answered": (
        "group", "and then?", timedelta(minutes=1),
        Quote(id=6, sender_id=BOT_ID, timestamp=NOW, summary="earlier"), ANSWER,
    ),
    "group chatter: left alone": ("group", "lunch?", timedelta(minutes=1), None, []),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
async def test_an_unanswered_message_after_a_crash(tmp_path: Path, case: str) -> None:
    scene, text, age, quote, expected = CASES[case]
    messenger, model = await recover_one(
        tmp_path,
        scene=scene,
        text=text,
        age=age,
        quote=quote,  # type: ignore[arg-type]
    )
    assert [m.text for m in messenger.sent] == expected
    assert all(m.reply_to == 7 for m in messenger.sent)
    assert len(model.requests) == (1 if expected == ANSWER else 0)


async def test_two_workers_recovering_together_answer_once(tmp_path: Path) -> None:
    """Two workers start at once on one database (one chat lock, as PostgreSQL advisory
    locks give them): the interrupted turn is answered by exactly one of them."""
    from bot.services.chat_lock import LocalChatLock

    store = InMemoryStore()
    shared_lock = LocalChatLock()
    model = ScriptedModel([Reply("Answered after the restart."), Reply("Answered twice!")])
    messenger = RecordingMessenger()
    apps = [
        wire_app(
            load_settings(data_dir=tmp_path, bot_locale="en"),
            store=store,
            messenger=messenger,
            model=model,
            clock=SteppingClock(NOW),
            chat_lock=shared_lock,
        )
        for _ in range(2)
    ]
    session = await store.open_session(SessionKey(chat_id=ALICE.id), scene="private")
    body = UserRecord(sender=ALICE, text="hi")
    at = NOW - timedelta(minutes=1)
    await store.append(session.id, [NewRecord(body=body, created_at=at, message_ids=(7,))])

    for app in apps:
        await app.inbound.recover_interrupted(bot_id=BOT_ID, bot_username="helper_bot")
    for app in apps:
        await app.inbound.drain()

    assert [m.text for m in messenger.sent] == ANSWER
    assert len(model.requests) == 1
