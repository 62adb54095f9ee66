"""Preparing a turn's request: the window, per-turn blocks, quotes outside the window."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from adapters.llm.scripted import CallTool, Reply, ScriptedModel, is_summary_request
from bot.agent.ledger_read import read_entries
from bot.context.history_trim import BREADCRUMB_TEXT
from bot.domain.facts import Quote
from tests.fakes import ALICE, BOB, CHEN, RecordingMessenger
from tests.test_agent.rig import make_app, say


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
    replies = [r for r in model.requests if not is_summary_request(r)]
    assert len(replies) == 11
    crumbed = [r for r in replies if r.messages[1].content == BREADCRUMB_TEXT]
    assert crumbed, "the window must have moved at least once"
    for request in replies:
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
