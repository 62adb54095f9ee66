"""The terminal says what the bot does: one INFO line per handled turn (chat, member, scene,
what started it, tokens, time, cost, how it ended), and no word of what anyone wrote; the
process's totals for the line `tgbot run` logs when it stops."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.agent.events import TurnOutcome
from bot.agent.turn_log import TurnTotals, _Sums
from bot.app.wiring import build_app
from bot.config import load_settings
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.ports import NewRecord
from bot.services.inbound_rules import BotIdentity
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, OWNER, RecordingMessenger, SteppingClock, inbound
from tests.test_services.test_inbound import GROUP, START, make


async def test_each_answered_turn_is_one_info_line_without_the_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([Reply("the secret reply words")])
    app, _store, _messenger, clock = make(tmp_path, model)
    caplog.set_level(logging.INFO, logger="tgbot.turns")
    await app.inbound.on_message(
        inbound(
            message_id=1, text="@Helper the secret question", at=clock.now(),
            chat_id=GROUP, sender=ALICE, mentions_bot=True,
        )
    )  # fmt: skip
    await app.inbound.drain()
    lines = [r.getMessage() for r in caplog.records if r.name == "tgbot.turns"]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("turn ")
    assert f"answered: chat {GROUP} (group) member {ALICE.id} trigger mention; 1 call(s), " in line
    assert " ms (model " in line
    assert "cost no prices" in line
    assert "secret" not in line


async def test_each_line_names_what_started_the_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel()
    store, messenger, clock = InMemoryStore(), RecordingMessenger(), SteppingClock(START)
    settings = load_settings(
        data_dir=tmp_path,
        owner_id=OWNER.id,
        bot_locale="en",
        triggers={"merge_window_seconds": 0, "keywords": ["deploy"]},
    )
    app = build_app(
        settings, store=store, messenger=messenger, bot_id=999, bot_name="Helper",
        clock=clock, offline=model,
    )  # fmt: skip
    caplog.set_level(logging.INFO, logger="tgbot.turns")
    said = iter(range(1, 100))

    async def send(replies_to_bot: bool = False, **fields: object) -> None:
        clock.advance(5)
        message = inbound(message_id=next(said), at=clock.now(), **fields)  # type: ignore[arg-type]
        await app.inbound.on_message(replace(message, replies_to_bot=replies_to_bot))
        await app.inbound.drain()

    await send(text="@Helper hi", chat_id=GROUP, mentions_bot=True)
    await send(text="and?", chat_id=GROUP, replies_to_bot=True)
    await send(text="/help", chat_id=GROUP, command="help")  # answered by the command itself
    await send(text="can we deploy now", chat_id=GROUP)
    await send(text="hello", chat_id=ALICE.id, chat_type="private")
    await send(text="hello", chat_id=OWNER.id, chat_type="private", sender=OWNER)
    clock.advance(5)
    edited = inbound(message_id=6, at=clock.now(), text="bye", chat_id=OWNER.id,
                     chat_type="private", sender=OWNER)  # fmt: skip
    await app.inbound.on_edit(replace(edited, is_edit=True, edit_date=clock.now()))
    await app.inbound.drain()
    await send(text="/retry", chat_id=OWNER.id, chat_type="private", sender=OWNER, command="retry")
    triggers = [
        r.getMessage().split(" trigger ")[1].split(";")[0]
        for r in caplog.records
        if r.name == "tgbot.turns"
    ]
    assert triggers == ["mention", "reply", "wake_word", "private", "owner", "edit", "retry"]


def test_the_stop_line_adds_up_the_turns() -> None:
    totals = TurnTotals(started=100.0)
    priced = _Sums(input_tokens=1200, output_tokens=80, cost=0.0021)
    totals.add(priced, TurnOutcome(status="answered"))
    totals.add(_Sums(input_tokens=300, output_tokens=0, cost=None), TurnOutcome(status="failed"))
    assert totals.line(now=100.0 + 3723) == (
        "stopped after 1h02m03s: 2 turn(s) handled (1 answered, 1 failed); tokens in 1500 "
        "out 80; cost 0.002100 (+1 turn(s) without prices)"
    )


async def test_a_turn_recovery_starts_says_so(tmp_path: Path) -> None:
    store, clock = InMemoryStore(), SteppingClock(START)
    app = build_app(
        load_settings(data_dir=tmp_path, bot_locale="en"), store=store,
        messenger=RecordingMessenger(), bot_id=999, bot_name="Helper", clock=clock,
        offline=ScriptedModel(),
    )  # fmt: skip
    session = await store.open_session(SessionKey(chat_id=ALICE.id), scene="private")
    body = UserRecord(sender=ALICE, text="still there?", quote=None)
    await store.append(session.id, [NewRecord(body=body, created_at=START, message_ids=(7,))])
    await app.recovery.recover(BotIdentity(id=999, username="helper_bot"))
    await app.inbound.drain()
    assert [outcome.trigger for outcome in app.inbound.outcomes] == ["recovery"]
