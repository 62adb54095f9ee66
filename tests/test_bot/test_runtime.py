"""The turn runtime end to end over fakes: in-memory store, scripted model, recording sender."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.agent.ledger import read_entries
from bot.app.wiring import App, build_app
from bot.config import load_settings
from bot.context import BREADCRUMB_TEXT
from bot.domain.facts import Quote
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from storage.memory import InMemoryStore
from tests.fakes import ALICE, BOB, CHEN, RecordingMessenger, SteppingClock, inbound

START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
CHAT = -100500


@pytest.fixture
def messenger() -> RecordingMessenger:
    return RecordingMessenger()


def make_app(
    tmp_path: Path,
    model: ScriptedModel,
    messenger: RecordingMessenger,
    *,
    group_tokens: int = 8000,
    **env: str,
) -> tuple[App, InMemoryStore, SteppingClock]:
    settings = load_settings(
        data_dir=tmp_path,
        owner_id=42,
        bot_locale="en",
        history={"group_tokens": group_tokens},
        triggers={"merge_window_seconds": 0},
        security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
        **env,
    )
    store = InMemoryStore()
    clock = SteppingClock(START)
    app = build_app(
        settings,
        store=store,
        messenger=messenger,
        bot_id=999,
        bot_name="Helper",
        clock=clock,
        offline=model,
    )
    return app, store, clock


async def say(app: App, clock: SteppingClock, mid: int, text: str, **kw: object) -> None:
    clock.advance(40)
    await app.inbound.on_message(inbound(message_id=mid, text=text, at=clock.now(), **kw))  # type: ignore[arg-type]
    await app.inbound.drain()


async def test_a_mention_is_answered_and_stored_as_conversation_only(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel([Reply("Hi Alice!")])
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "hello everyone", sender=BOB)
    await say(app, clock, 2, "@Helper what's up?", mentions_bot=True)

    assert messenger.texts(CHAT) == ["Hi Alice!"]
    assert messenger.sent[0].reply_to == 2
    request = model.requests[0]
    assert request.messages[0].role == "system"
    current = request.messages[-1]
    assert current.content.startswith("[id:m2;user:Alice;user_id:1001;")
    assert "[Turn context]" in current.content
    assert "[Turn context]" not in request.messages[-2].content

    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    path = await store.load_path(session.id)
    assert [r.kind for r in path] == ["user", "user", "assistant"]
    for record in path:
        if isinstance(record.body, UserRecord):
            assert "[Turn context]" not in record.body.text
    assert path[-1].message_ids == (messenger.sent[0].message_id,)

    scan = read_entries(tmp_path / "agent-traces")
    entries = list(scan)
    assert len(entries) == 1
    assert entries[0].est_current > 0
    assert entries[0].est_fixed > 0


async def test_tool_call_rewrites_the_alias_and_stores_call_with_result(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel([CallTool("delete_message", {"message_id": "m1"}), Reply("Deleted it.")])
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 501, "spam spam", sender=CHEN)
    await say(app, clock, 502, "@Helper delete m1 please", mentions_bot=True)

    assert messenger.deleted == [(CHAT, 501)]
    second = model.requests[1]
    tool_message = second.messages[-1]
    assert tool_message.role == "tool"
    assert json.loads(tool_message.content) == {"deleted": True}
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    kinds = [r.kind for r in await store.load_path(session.id)]
    assert kinds == ["user", "user", "assistant", "tool_results", "assistant"]


async def test_an_unknown_alias_sends_nothing_and_the_model_reads_an_error(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [CallTool("delete_message", {"message_id": "m999"}), Reply("I could not.")]
    )
    app, _store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 7, "@Helper delete m999", mentions_bot=True)

    assert messenger.deleted == []
    result = model.requests[1].messages[-1]
    assert result.role == "tool"
    assert result.is_error
    assert "reference not confirmed" in result.content


async def test_old_tool_results_shrink_in_later_turns(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [
            CallTool("inspect_conversation_reference", {"reference": "m1"}),
            Reply("It is long."),
            Reply("Sure."),
        ]
    )
    app, _store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "x" * 1500, sender=BOB)
    await say(app, clock, 2, "@Helper what did Bob say in m1?", mentions_bot=True)
    whole = model.requests[1].messages[-1]
    assert whole.role == "tool"
    assert len(whole.content) > 1500
    await say(app, clock, 3, "@Helper thanks", mentions_bot=True)
    later = [m for m in model.requests[2].messages if m.role == "tool"]
    assert len(later) == 1
    assert later[0].content.endswith("chars omitted)")
    assert len(later[0].content) < 260


async def test_history_stays_within_the_scene_budget_with_a_breadcrumb(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = make_app(tmp_path, model, messenger, group_tokens=1500)
    for mid in range(1, 120):
        sender = (ALICE, BOB, CHEN)[mid % 3]
        await say(
            app,
            clock,
            mid,
            f"message {mid} " + "words " * 30,
            sender=sender,
            mentions_bot=mid % 10 == 0,
        )
    assert len(model.requests) == 11
    crumbed = [r for r in model.requests if r.messages[1].content == BREADCRUMB_TEXT]
    assert crumbed, "the window must have moved at least once"
    for request in model.requests:
        history = list(request.messages[1:-1])
        assert sum(m.tokens or 0 for m in history) <= 1500
    entries = list(read_entries(tmp_path / "agent-traces"))
    assert len(entries) == len(model.requests)
    assert any(e.trim is not None for e in entries)


async def test_the_history_prefix_is_byte_stable_between_window_moves(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = make_app(tmp_path, model, messenger)
    for mid in range(1, 30):
        await say(app, clock, mid, f"note {mid}", mentions_bot=mid % 5 == 0, sender=BOB)
    first, second = model.requests[-2], model.requests[-1]
    shared = len(first.messages) - 1
    assert [m.content for m in second.messages[:shared]] == [
        m.content for m in first.messages[:shared]
    ]


async def test_a_quote_outside_the_window_is_an_inline_line_naming_the_alias(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = make_app(tmp_path, model, messenger, group_tokens=600)
    first_at = clock.now() + timedelta(seconds=40)
    await say(app, clock, 1, "the blue kettle is broken", sender=BOB)
    for mid in range(2, 60):
        await say(app, clock, mid, f"chatter {mid} " + "la " * 20, sender=CHEN)
    quote = Quote(id=1, sender_id=BOB.id, timestamp=first_at, summary="the blue kettle is broken")
    await say(app, clock, 60, "@Helper is it fixed?", mentions_bot=True, quote=quote)

    current = model.requests[-1].messages[-1].content
    assert "reply_to:" not in current.splitlines()[0]
    assert "[quote id:m1;user_id:1002;time:" in current
    assert current.splitlines()[1].endswith("the blue kettle is broken")


async def test_send_message_replies_by_alias_and_records_its_bubble(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [CallTool("send_message", {"text": "ping Bob", "reply_to_message_id": "m1"}), Reply("ok")]
    )
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 71, "I'm Bob", sender=BOB)
    await say(app, clock, 72, "@Helper poke Bob for me", mentions_bot=True)

    extra = messenger.sent[0]
    assert (extra.text, extra.reply_to) == ("ping Bob", 71)
    event = await store.find_event(CHAT, extra.message_id)
    assert event is not None
    assert (event.is_bot, event.sender_id, event.sender_name) == (True, 999, "Helper")
    assert messenger.texts(CHAT) == ["ping Bob", "ok"]
