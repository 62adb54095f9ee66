"""Start-up recovery policy (`CrashRecovery.recover`) over the in-memory store:
which interrupted turns are answered, which get a short notice, which are left alone; and
the running workers' scan for orphaned turns (`CrashRecovery.recover_orphans`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.scripted import Fail, Reply, ScriptedModel
from bot.app.recovery_loop import orphan_scan_loop, start_orphan_scan
from bot.app.wiring import App
from bot.config import load_settings
from bot.domain.facts import Quote, Sender
from bot.domain.ids import Scene, SessionKey
from bot.domain.records import UserRecord
from bot.errors import ProviderUnavailable
from bot.ports import NewRecord
from bot.services.inbound_rules import BotIdentity
from bot.services.turn_scheduler import LocalChatLock
from bot.texts import text
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.memory_store import InMemoryStore
from tests.deadlines import EVENT, deadline
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


# ---------------------------------------------------------------- the orphaned-turn scan

IDENTITY = BotIdentity(id=BOT_ID, username="helper_bot")
GRACE = timedelta(seconds=12)


async def orphaned(
    tmp_path: Path, model: ScriptedModel, *, workers: int = 1, age: timedelta, refused: bool = False
) -> tuple[list[App], InMemoryStore, SessionKey, SteppingClock, RecordingMessenger, LocalChatLock]:
    """`workers` apps on one store and one chat lock (as PostgreSQL gives them), and a
    private chat whose newest record is Alice's "hi" (message 7), `age` old."""
    store, lock, clock, messenger = (
        InMemoryStore(),
        LocalChatLock(),
        SteppingClock(NOW),
        RecordingMessenger(),
    )
    settings = load_settings(data_dir=tmp_path, bot_locale="en")
    apps = [
        wire_app(
            settings, store=store, messenger=messenger, model=model, clock=clock, chat_lock=lock
        )
        for _ in range(workers)
    ]
    key = SessionKey(chat_id=ALICE.id)
    session = await store.open_session(key, scene="private")
    body = UserRecord(sender=ALICE, text="hi", refused=refused)
    await store.append(session.id, [NewRecord(body=body, created_at=NOW - age, message_ids=(7,))])
    return apps, store, key, clock, messenger, lock  # fmt: skip


async def scan(apps: list[App]) -> int:
    """Every worker scans at once; how many turns they started."""
    started = await asyncio.gather(
        *(a.recovery.recover_orphans(IDENTITY, grace=GRACE) for a in apps)
    )
    for app in apps:
        await app.inbound.drain()
    return sum(started)  # fmt: skip


async def test_two_scanning_workers_answer_an_orphaned_turn_once(tmp_path: Path) -> None:
    """A worker died mid-turn (the trigger is the newest record, nobody holds the lock):
    once the scans have seen it waiting for the grace period, one answer, one model call."""
    model = ScriptedModel([Reply("Answered by a survivor."), Reply("Answered twice!")])
    apps, _, _, clock, messenger, _ = await orphaned(
        tmp_path, model, workers=2, age=timedelta(minutes=3)
    )

    assert await scan(apps) == 0  # first seen now (its date says nothing of when it came)
    clock.advance(GRACE.total_seconds() - 1)
    assert await scan(apps) == 0
    clock.advance(1)
    assert await scan(apps) >= 1
    clock.advance(GRACE.total_seconds())
    assert await scan(apps) == 0  # answered: nothing waits any more

    assert [(m.text, m.reply_to) for m in messenger.sent] == [("Answered by a survivor.", 7)]
    assert len(model.requests) == 1


async def test_a_turn_whose_lock_a_live_worker_holds_is_not_orphaned(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("Stolen!")])
    apps, _, key, clock, messenger, lock = await orphaned(tmp_path, model, age=timedelta(minutes=1))
    assert await scan(apps) == 0
    clock.advance(GRACE.total_seconds())
    async with lock.hold(key, scope="turn"):  # another worker is running this turn
        assert await scan(apps) == 0
    assert messenger.sent == []
    assert model.requests == []
    assert await scan(apps) == 1  # released without an answer: that worker died


async def test_the_scan_leaves_refused_late_and_failed_turns_alone(tmp_path: Path) -> None:
    """A message the rate limit refused is never answered; one older than the answer window
    is left to start-up (which says "ask again" once); a recovered turn that fails without
    storing anything is not run again by the same worker."""
    for refused, age in ((True, timedelta(minutes=1)), (False, timedelta(minutes=11))):
        model = ScriptedModel([Reply("Should not be sent.")])
        apps, _, _, clock, messenger, _ = await orphaned(tmp_path, model, age=age, refused=refused)
        assert await scan(apps) == 0
        clock.advance(GRACE.total_seconds())
        assert await scan(apps) == 0
        assert messenger.sent == []
        assert model.requests == []

    model = ScriptedModel([Fail(ProviderUnavailable("down")), Reply("Retried again!")])
    apps, _, _, clock, messenger, _ = await orphaned(tmp_path, model, age=timedelta(minutes=1))
    await scan(apps)
    clock.advance(GRACE.total_seconds())
    assert await scan(apps) == 1
    for _ in range(3):
        clock.advance(GRACE.total_seconds())
        assert await scan(apps) == 0
    assert len(model.requests) == 1
    assert len(messenger.sent) == 1  # the one failure notice


async def test_the_scan_loop_scans_until_stopped(tmp_path: Path) -> None:
    class CountingRecovery:
        def __init__(self) -> None:
            self.scans = 0
            self.thrice = asyncio.Event()

        async def recover_orphans(self, bot: BotIdentity, *, grace: timedelta) -> int:
            self.scans += 1
            if self.scans == 2:
                raise RuntimeError("a failed scan is logged, the loop goes on")
            if self.scans == 3:
                self.thrice.set()
            return 0

    recovery = CountingRecovery()
    stop = asyncio.Event()
    loop = asyncio.create_task(
        orphan_scan_loop(
            recovery,  # type: ignore[arg-type]
            IDENTITY,
            every_seconds=0.01,
            grace=GRACE,
            stop=stop,
        )
    )
    async with asyncio.timeout(deadline(EVENT)):
        await recovery.thrice.wait()
        stop.set()
        await loop
    assert loop.result() is None


async def test_sqlite_has_no_scan(tmp_path: Path) -> None:
    """One process on SQLite recovers its own turns at start-up; nobody else is there."""
    app = wire_app(
        rig_settings(tmp_path, database_url=f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}"),
        store=InMemoryStore(),
        messenger=RecordingMessenger(),
        model=ScriptedModel([]),
    )
    assert start_orphan_scan(app, IDENTITY, stop=asyncio.Event()) is None
