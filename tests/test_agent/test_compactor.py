"""Compaction through the runtime (issue 17): the summary of turns that left the window.

Driven through the shared app rig (in-memory store, scripted model, recording sender): a
group chats, the window moves, and what the model is sent next is read back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters.llm.scripted import CallTool, Fail, Reply, ScriptedModel, is_summary_request
from bot.agent.ledger_read import read_entries
from bot.app.wiring import App
from bot.context.compaction import INSTRUCTION_MARKER, SUMMARY_PREFIX
from bot.context.history_trim import BREADCRUMB_TEXT
from bot.domain.ids import SessionKey
from bot.domain.records import SummaryRecord
from bot.errors import ProviderUnavailable
from bot.ports import LLMRequest
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, BOB, CHEN, RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import CHAT, START, say

CAP = 40


def group_app(
    tmp_path: Path,
    model: ScriptedModel,
    messenger: RecordingMessenger,
    *,
    store: InMemoryStore | None = None,
    clock: SteppingClock | None = None,
    **compaction: Any,
) -> tuple[App, InMemoryStore, SteppingClock]:
    """A group whose window is capped at `CAP` messages (the token budget never binds)."""
    settings = rig_settings(
        tmp_path,
        owner_id=42,
        history={"group_tokens": 8_000, "group": {"max_recent_messages": CAP}},
        compaction={"group_tokens": 300, **compaction},
    )
    store = store or InMemoryStore()
    clock = clock or SteppingClock(START)
    app = wire_app(settings, store=store, messenger=messenger, model=model, clock=clock)
    return app, store, clock


def replies(model: ScriptedModel) -> list[LLMRequest]:
    return [r for r in model.requests if not is_summary_request(r)]


def summaries(model: ScriptedModel) -> list[LLMRequest]:
    return [r for r in model.requests if is_summary_request(r)]


async def chatter(app: App, clock: SteppingClock, first: int, count: int) -> int:
    for mid in range(first, first + count):
        sender = (ALICE, BOB, CHEN)[mid % 3]
        await say(app, clock, mid, f"short note {mid}", sender=sender)
    return first + count


async def test_the_summary_sits_right_after_the_breadcrumb_and_names_its_range(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(summaries=[Reply("Alice and Bob planned the release; see m3.")])
    app, store, clock = group_app(tmp_path, model, messenger)
    after = await chatter(app, clock, 1, 60)
    await say(app, clock, after, "@Helper where are we?", mentions_bot=True)

    (fold,) = summaries(model)
    assert fold.tool_choice == "none"
    assert fold.tools, "the summary request offers the same tool schemas"
    assert fold.messages[-1].content.startswith(INSTRUCTION_MARKER)
    (reply,) = replies(model)
    assert reply.messages[1].content == BREADCRUMB_TEXT
    summary = reply.messages[2]
    assert summary.role == "user"
    title, text = summary.content.split("\n", 1)
    assert title.startswith(SUMMARY_PREFIX + " m1–m")
    assert text == "Alice and Bob planned the release; see m3."
    # the summary request repeats the request as the chat saw it, then the instruction
    assert fold.messages[0] == reply.messages[0]
    # the window (history and the current message) keeps 75 % of the message cap
    history = reply.messages[3:-1]
    assert len(history) + 1 >= CAP * 3 // 4
    # the title's last alias is the message right before the window
    last = title.split("–")[1].rstrip("]")
    first_shown = history[0].content.split(";", 1)[0].removeprefix("[id:")
    assert int(first_shown[1:]) == int(last[1:]) + 1

    # stored as a record of kind `summary` off the active path, survives a new process
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    path = await store.load_path(session.id)
    assert all(not isinstance(r.body, SummaryRecord) for r in path)
    again, _, _ = group_app(tmp_path, model, messenger, store=store, clock=clock)
    state = await again.runner.prepare(session, turn_id="t", persist_window=False)
    aliases = state.window.aliases
    assert state.messages[2].content == summary.content
    assert aliases.resolve("m3") is not None  # aliases the summary mentions are valid


async def test_two_mentions_with_little_traffic_share_their_prefix(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = group_app(tmp_path, model, messenger)
    after = await chatter(app, clock, 1, 60)
    await say(app, clock, after, "@Helper first", mentions_bot=True)
    after = await chatter(app, clock, after + 1, 2)
    await say(app, clock, after, "@Helper second", mentions_bot=True)
    after = await chatter(app, clock, after + 1, 2)
    await say(app, clock, after, "@Helper third", mentions_bot=True)
    first, second, third = replies(model)
    assert first.messages[2].content.startswith(SUMMARY_PREFIX)
    for earlier, later in ((first, second), (second, third)):
        shared = len(earlier.messages) - 1
        assert later.messages[:shared] == earlier.messages[:shared]


async def test_a_failing_summary_call_never_fails_the_member(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(summaries=[Fail(ProviderUnavailable("summary route down"))])
    app, _store, clock = group_app(tmp_path, model, messenger)
    after = await chatter(app, clock, 1, 60)
    await say(app, clock, after, "@Helper still there?", mentions_bot=True)
    (reply,) = replies(model)
    # the move waits for a good fold (issue 50): nothing is left out of what the model sees,
    # no summary followed by a gap
    assert all(m.content != BREADCRUMB_TEXT for m in reply.messages)
    assert reply.messages[1].content.startswith("[id:m1;")
    assert messenger.sent[-1].text == "Noted: @Helper still there?"
    entries = list(read_entries(tmp_path / "agent-traces"))
    compaction = next(e for e in entries if e.purpose == "compaction")
    assert compaction.error is not None
    assert "summary route down" in compaction.error

    # the next move tries again, and this time it works
    after = await chatter(app, clock, after + 1, 30)
    await say(app, clock, after, "@Helper and now?", mentions_bot=True)
    assert replies(model)[-1].messages[2].content.startswith(SUMMARY_PREFIX)


async def test_a_summary_is_prepared_after_a_reply_when_the_next_move_is_near(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = group_app(tmp_path, model, messenger)
    compactor = app.runner.compactor
    assert compactor is not None
    after = await chatter(app, clock, 1, 60)
    await say(app, clock, after, "@Helper one", mentions_bot=True)  # moves: synchronous fold
    assert compactor.sync_folds == 1
    # grow the window to within 10 % of the cap; the reply then prepares the next fold
    after = await chatter(app, clock, after + 1, 8)
    await say(app, clock, after, "@Helper two", mentions_bot=True)
    await compactor.drain()
    assert compactor.prepared_folds == 1
    prepared = summaries(model)[-1]
    # its request repeats the reply request before it: a warm cache serves most of it
    previous_reply = replies(model)[-1]
    shared = len(previous_reply.messages) - 1
    assert prepared.messages[:shared] == previous_reply.messages[:shared]
    # the move comes and uses it: no model call waits in the member's turn
    after = await chatter(app, clock, after + 1, 3)
    await say(app, clock, after, "@Helper three", mentions_bot=True)
    assert compactor.sync_folds == 1
    assert len(summaries(model)) == 2
    moved = replies(model)[-1]
    assert (
        moved.messages[2].content.split("\n")[0]
        == prepared.messages[-1]
        .content.split("\n")[1]
        .replace("fold: ", SUMMARY_PREFIX + " ")
        .split(";")[0]
        + "]"
    )


async def test_an_alias_the_summary_mentions_reaches_the_inspect_tool(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(summaries=[Reply("Bob asked about the kettle in m2.")])
    app, _store, clock = group_app(tmp_path, model, messenger)
    after = await chatter(app, clock, 1, 60)
    model.add(CallTool("inspect_conversation_reference", {"reference": "m2"}), Reply("ok"))
    await say(app, clock, after, "@Helper what was m2?", mentions_bot=True)
    tool_result = replies(model)[-1].messages[-1]
    assert tool_result.role == "tool"
    assert not tool_result.is_error, tool_result.content
    assert json.loads(tool_result.content)["entries"][0]["text"] == "short note 2"


async def test_compaction_can_be_switched_off(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = group_app(tmp_path, model, messenger, enabled=False)
    assert app.runner.compactor is None
    after = await chatter(app, clock, 1, 60)
    await say(app, clock, after, "@Helper hi", mentions_bot=True)
    assert summaries(model) == []
    (reply,) = replies(model)
    assert reply.messages[1].content == BREADCRUMB_TEXT
    assert not reply.messages[2].content.startswith(SUMMARY_PREFIX)
