"""Issue 50, item 10: with `BOT_LOCALE=auto` a bilingual group keeps its cached prefix.

Through the app rig: Alice writes Chinese, Bob English, taking turns at mentioning the bot.
The system prompt and the history of every request stay in the chat's language (each
request's history is the previous one's, grown), and the member's own language rides in
the per-turn block.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, BOB, RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START, say


async def test_a_bilingual_group_keeps_its_prefix(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    settings = rig_settings(tmp_path, owner_id=42, bot_locale="auto")
    clock = SteppingClock(START)
    app = wire_app(settings, store=InMemoryStore(), messenger=messenger, model=model, clock=clock)
    speakers = [(ALICE, "zh", "@Helper 发布计划怎么样了"), (BOB, "en", "@Helper any news?")]
    for n in range(8):
        sender, code, words = speakers[n % 2]
        await say(
            app, clock, n + 1, f"{words} {n}", sender=sender, mentions_bot=True,
            language_code=code,
        )  # fmt: skip
    requests = model.requests
    assert len(requests) == 8
    for earlier, later in pairwise(requests):
        kept = len(earlier.messages) - 1  # all but the current message (its blocks go)
        assert later.messages[:kept] == earlier.messages[:kept]
    for n, request in enumerate(requests):
        current = request.messages[-1].content
        assert f"language: {speakers[n % 2][1]}" in current
