"""Start-up recovery policy (`CrashRecovery.recover`) over the in-memory store:
which interrupted turns are answered, which get a short notice, which are left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from adapters.telegram.fake_api import FakeBotApi
from bot.config import load_settings
from bot.domain.facts import Quote, Sender
from bot.domain.ids import Scene, SessionKey
from bot.domain.records import UserRecord
from bot.ports import NewRecord
from bot.services.triggers import BotIdentity
from bot.texts import text
from storage.engine import create_engine_for
from storage.memory import InMemoryStore
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.polling_rig import polling_app
from tests.rig import BOT_ID, rig_settings, wire_app
from tests.test_reliability.conftest import wait_confirmed

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ALICE = Sender(id=1001, name="Alice")
ALICE_API = {"id": ALICE.id, "first_name": "Alice"}


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
    await app.recovery.recover(BotIdentity(id=BOT_ID, username="helper_bot"))
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
        await app.recovery.recover(BotIdentity(id=BOT_ID, username="helper_bot"))
    for app in apps:
        await app.inbound.drain()

    assert [m.text for m in messenger.sent] == ANSWER
    assert len(model.requests) == 1


async def test_a_message_the_rate_limit_refused_is_not_answered_after_a_restart(
    api: FakeBotApi, tmp_path: Path
) -> None:
    """A member floods a private chat past the limit; the bot is restarted (a new app on the
    same SQLite file, polling the same fake Bot API) and recovers: the refused message, the
    newest of the chat, stays unanswered, as it was before the restart."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}"
    await upgrade_database(url)
    settings = rig_settings(
        tmp_path, security={"user_messages_per_minute": 2, "chat_messages_per_minute": 60}
    )
    first = ScriptedModel([Reply("one"), Reply("two")])
    store = SqlStore(create_engine_for(url))
    async with polling_app(settings, api, store=store, model=first) as app:
        for n in range(3):  # each answered before the next, so the refused one is the newest
            await wait_confirmed(
                api, api.push_update(api.user_message(ALICE.id, ALICE_API, f"m{n}"))
            )
            await app.inbound.drain()
    sent = [m["text"] for m in api.sent_messages(ALICE.id)]
    assert sent == ["one", "two", text("en", "rate_limited")]

    after = ScriptedModel([Reply("Answered the refused message after the restart.")])
    store = SqlStore(create_engine_for(url))
    async with polling_app(settings, api, store=store, model=after) as app:
        session = await store.find_session(SessionKey(chat_id=ALICE.id))
        assert session is not None
        path = await store.load_path(session.id)
        assert [r.body.refused for r in path if isinstance(r.body, UserRecord)] == [
            False,
            False,
            True,
        ]
        await app.recovery.recover(BotIdentity(id=api.bot_id, username=api.username))
        await app.inbound.drain()
    assert after.requests == []
    assert [m["text"] for m in api.sent_messages(ALICE.id)] == sent
