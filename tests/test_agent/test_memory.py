"""Memory that never forgets wrongly (issue 25): the window, the summary and what rides on a
turn, driven through real turns of the shared app rig (in-memory store, scripted model)."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import Fail, Reply, ScriptedModel
from bot.context.compaction import SUMMARY_PREFIX
from bot.errors import ProviderUnavailable
from tests.fakes import RecordingMessenger
from tests.test_agent.rig import say
from tests.test_agent.test_compactor import chatter, group_app, replies, summaries


async def test_a_failed_summary_is_folded_again_with_the_last_good_one(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    """Item 1: a failed fold never erases the summary it would have extended."""
    model = ScriptedModel(
        summaries=[
            Reply("First summary: Alice planned the release in m3."),
            Fail(ProviderUnavailable("summary route down")),
            Reply("Third summary."),
        ]
    )
    app, _store, clock = group_app(tmp_path, model, messenger, prepare_margin=0.0)
    after = await chatter(app, clock, 1, 60)
    await say(app, clock, after, "@Helper one", mentions_bot=True)
    first = replies(model)[-1].messages[2].content
    assert first.startswith(SUMMARY_PREFIX + " m1–")
    after = await chatter(app, clock, after + 1, 30)
    await say(app, clock, after, "@Helper two", mentions_bot=True)  # the fold fails
    assert len(summaries(model)) == 2
    # the last good summary still stands for what it covers
    assert replies(model)[-1].messages[2].content == first
    after = await chatter(app, clock, after + 1, 30)
    await say(app, clock, after, "@Helper three", mentions_bot=True)
    third = summaries(model)[2]
    # the retry folds the last good summary and every record since its end
    assert any(m.content == first for m in third.messages)
    assert "fold: m1–" in third.messages[-1].content
    end = int(first.split("\n")[0].split("–")[1].rstrip("]")[1:])
    shown = "\n".join(m.content for m in third.messages)
    assert f"[id:m{end + 1};" in shown
    title = replies(model)[-1].messages[2].content.split("\n")[0]
    assert title.startswith(SUMMARY_PREFIX + " m1–")
