"""The inbound service over fakes: what is stored, what is answered, edits, /retry, bursts,
and the owner's /model and /context."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.app.wiring import App, build_app
from bot.config import load_settings
from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord, UserRecord
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, BOB, CHEN, OWNER, RecordingMessenger, SteppingClock, inbound

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
GROUP = -100500


def make(
    tmp_path: Path, model: ScriptedModel, *, merge: float = 0.0, **settings: object
) -> tuple[App, InMemoryStore, RecordingMessenger, SteppingClock]:
    store = InMemoryStore()
    messenger = RecordingMessenger()
    clock = SteppingClock(START)
    app = build_app(
        load_settings(
            data_dir=tmp_path,
            owner_id=OWNER.id,
            bot_locale="en",
            triggers={"merge_window_seconds": merge},
            **settings,
        ),
        store=store,
        messenger=messenger,
        bot_id=999,
        bot_name="Helper",
        clock=clock,
        offline=model,
    )
    return app, store, messenger, clock


async def texts_on_path(store: InMemoryStore, chat: int) -> list[tuple[str, str]]:
    session = await store.find_session(SessionKey(chat_id=chat))
    assert session is not None
    out = []
    for record in await store.load_path(session.id):
        if isinstance(record.body, UserRecord | AssistantRecord):
            out.append((record.kind, record.body.text))
    return out


async def test_groups_store_everything_and_answer_only_when_addressed(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("yes?")])
    app, store, messenger, clock = make(tmp_path, model)
    await app.inbound.on_message(inbound(message_id=1, text="lunch?", at=clock.now()))
    await app.inbound.on_message(
        inbound(message_id=2, text="@Helper hi", at=clock.now(), mentions_bot=True, sender=BOB)
    )
    await app.inbound.on_message(inbound(message_id=2, text="@Helper hi", at=clock.now()))
    await app.inbound.drain()
    assert await texts_on_path(store, GROUP) == [
        ("user", "lunch?"),
        ("user", "@Helper hi"),
        ("assistant", "yes?"),
    ]
    assert [m.reply_to for m in messenger.sent] == [2]


async def test_a_private_burst_inside_the_merge_window_is_one_turn(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("all three, got it")])
    app, store, messenger, clock = make(tmp_path, model, merge=0.2)
    for mid, text in enumerate(("so", "about the", "release"), start=1):
        await app.inbound.on_message(
            inbound(
                chat_id=ALICE.id, chat_type="private", message_id=mid, text=text, at=clock.now()
            )
        )
    await app.inbound.drain()
    assert messenger.texts(ALICE.id) == ["all three, got it"]
    assert len(model.requests) == 1
    session = await store.find_session(SessionKey(chat_id=ALICE.id))
    assert session is not None
    merged = [r.body.merged for r in await store.load_path(session.id) if r.kind == "user"]
    assert merged == [False, True, True]


async def test_editing_the_answered_message_answers_again_on_a_new_branch(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("Paris."), Reply("Rome.")])
    app, store, messenger, clock = make(tmp_path, model)
    private = {"chat_id": ALICE.id, "chat_type": "private"}
    await app.inbound.on_message(
        inbound(**private, message_id=5, text="capital of France?", at=clock.now())  # type: ignore[arg-type]
    )
    await app.inbound.drain()
    edited = inbound(**private, message_id=5, text="capital of Italy?", at=clock.now())  # type: ignore[arg-type]
    await app.inbound.on_edit(replace(edited, is_edit=True, edit_date=clock.now()))
    await app.inbound.drain()

    assert messenger.texts(ALICE.id) == ["Paris.", "Rome."]
    assert await texts_on_path(store, ALICE.id) == [
        ("user", "capital of Italy?"),
        ("assistant", "Rome."),
    ]
    event = await store.find_platform_message(ALICE.id, 5)
    assert event is not None
    assert event.text == "capital of Italy?"
    current = model.requests[-1].messages[-1].content
    assert current.startswith("[id:m1;")
    assert "capital of France?" not in "".join(m.content for m in model.requests[-1].messages)


async def test_retry_regenerates_the_last_answer_on_a_new_branch(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("first try"), Reply("second try")])
    app, store, messenger, clock = make(tmp_path, model)
    await app.inbound.on_message(
        inbound(chat_id=ALICE.id, chat_type="private", message_id=1, text="joke?", at=clock.now())
    )
    await app.inbound.drain()
    await app.inbound.on_message(
        inbound(
            chat_id=ALICE.id,
            chat_type="private",
            message_id=3,
            text="/retry",
            at=clock.now(),
            command="retry",
        )
    )
    await app.inbound.drain()
    assert messenger.texts(ALICE.id) == ["first try", "second try"]
    assert await texts_on_path(store, ALICE.id) == [("user", "joke?"), ("assistant", "second try")]


async def test_retry_in_a_busy_group_answers_the_requesters_question_again(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([Reply("Paris, I think"), Reply("Paris, for sure")])
    app, store, messenger, clock = make(tmp_path, model)

    async def say(mid: int, sender: Sender, body: str, **extra: object) -> None:
        clock.advance(5)
        await app.inbound.on_message(
            inbound(message_id=mid, text=body, sender=sender, at=clock.now(), **extra)  # type: ignore[arg-type]
        )
        await app.inbound.drain()

    await say(1, ALICE, "@Helper capital of France?", mentions_bot=True)
    await say(2, BOB, "lunch at noon?")
    await say(3, CHEN, "sure")
    await say(4, ALICE, "/retry", command="retry")

    assert messenger.texts(GROUP) == ["Paris, I think", "Paris, for sure"]
    assert [m.reply_to for m in messenger.sent] == [1, 1]
    # the others' messages stay in the conversation; the question is asked again after them
    assert await texts_on_path(store, GROUP) == [
        ("user", "@Helper capital of France?"),
        ("assistant", "Paris, I think"),
        ("user", "lunch at noon?"),
        ("user", "sure"),
        ("user", "@Helper capital of France?"),
        ("assistant", "Paris, for sure"),
    ]
    current = model.requests[-1].messages[-1]
    assert "capital of France?" in str(current.content)


async def test_retry_without_an_answered_turn_of_ones_own_says_so(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("hello Bob")])
    app, _store, messenger, clock = make(tmp_path, model)
    await app.inbound.on_message(
        inbound(message_id=1, text="@Helper hi", sender=BOB, at=clock.now(), mentions_bot=True)
    )
    await app.inbound.drain()
    await app.inbound.on_message(
        inbound(message_id=2, text="just chatting", sender=ALICE, at=clock.now())
    )
    await app.inbound.on_message(
        inbound(message_id=3, text="/retry", sender=ALICE, at=clock.now(), command="retry")
    )
    await app.inbound.drain()
    assert messenger.texts(GROUP) == ["hello Bob", "There is no message to retry yet."]
    assert len(model.requests) == 1


async def test_the_owner_switches_models_and_sees_an_unknown_window(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("hello")])
    app, _store, messenger, clock = make(
        tmp_path, model, llm_model="deepseek-chat", llm_context_window=64_000
    )
    owner_chat = {"chat_id": OWNER.id, "chat_type": "private", "sender": OWNER}

    async def command(mid: int, text: str) -> str:
        name = text.split()[0].lstrip("/")
        await app.inbound.on_message(
            inbound(**owner_chat, message_id=mid, text=text, at=clock.now(), command=name)  # type: ignore[arg-type]
        )
        await app.inbound.drain()
        return messenger.texts(OWNER.id)[-1]

    assert "window: 64000" in await command(1, "/context")
    assert "default:deepseek-reasoner" in await command(2, "/model deepseek-reasoner")
    shown = await command(3, "/context")
    assert "model: default:deepseek-reasoner" in shown
    assert "window: unknown" in shown
    refused = inbound(chat_id=GROUP, message_id=4, text="/model x", at=clock.now(), command="model")
    await app.inbound.on_message(refused)
    await asyncio.sleep(0)
    assert messenger.texts(GROUP) == ["Sorry, only the bot's owner can use this command."]


async def test_per_chat_state_stays_bounded_and_turns_stay_correct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.services.turn_scheduler as turn_scheduler

    monkeypatch.setattr(turn_scheduler, "MAX_IDLE_SESSIONS", 5)
    model = ScriptedModel()
    app, _store, messenger, clock = make(tmp_path, model)
    for chat in range(1, 31):
        message = inbound(
            chat_id=chat, chat_type="private", message_id=1, text=f"hi {chat}", at=clock.now()
        )
        await app.inbound.on_message(message)
        if chat % 10 == 0:  # bursts of ten chats at once, then quiet
            await app.inbound.drain()
    await app.inbound.drain()
    assert len(app.inbound.turns._sessions) <= 11
    assert all(len(messenger.texts(chat)) == 1 for chat in range(1, 31))
