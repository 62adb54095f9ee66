"""Issue 35: every model call is held to the window by one measure, and the summary's bound
follows the window's clamped budget. Through real turns of the app rig (in-memory store,
scripted model), in the owner's private chat on a small model window.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from adapters.llm.scripted import ScriptedModel, is_summary_request
from bot.agent.ledger_read import read_entries
from bot.agent.token_corrections_file import FILE_NAME
from bot.context.tokens import estimate_history_tokens
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.ports import LLMRequest
from testkit.memory_store import InMemoryStore
from tests.fakes import OWNER, RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START, say

FOLD = re.compile(r"at most (\d+) tokens")
NOTE = "the rollout plan for the billing service needs a look "


def needs(request: LLMRequest) -> int:
    """Our estimate of a request: its messages and tool schemas."""
    schemas = [tool.schema() for tool in request.tools]
    return estimate_history_tokens(request.messages) + estimate_tool_schema_tokens(schemas)


async def owner_chat(
    tmp_path: Path, messenger: RecordingMessenger, *, window: int, turns: int, words: int
) -> ScriptedModel:
    model = ScriptedModel()
    settings = rig_settings(tmp_path, owner_id=42, llm_context_window=window)
    clock = SteppingClock(START)
    app = wire_app(settings, store=InMemoryStore(), messenger=messenger, model=model, clock=clock)
    for mid in range(1, turns + 1):
        text = f"note {mid}: {NOTE * words}"
        await say(app, clock, mid * 2, text, sender=OWNER, chat_type="private", chat_id=42)
    return model


async def test_a_summary_call_is_held_to_the_window_like_a_turn_call(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    """The route's learned correction says the provider counts 3 tokens for each of ours: a
    summary request that fits by our plain estimate but not by the corrected one is refused
    before sending, as a turn's call would be. Before issue 35 the summary calls sent 6,072,
    6,174, 6,279… corrected tokens to a 6,000-token window (6,500 here: the job tools'
    schemas take room)."""
    book = {"version": 1, "routes": {"default/offline-demo": {"ratio": 3.0, "samples": 50}}}
    (tmp_path / FILE_NAME).write_text(json.dumps(book), encoding="utf-8")
    model = await owner_chat(tmp_path, messenger, window=6_500, turns=14, words=12)
    assert len([m for m in messenger.sent if m.text.startswith("Noted: note")]) == 14
    assert all(3 * needs(request) <= 6_500 for request in model.requests)
    entries = [e for e in read_entries(tmp_path / "agent-traces") if e.purpose == "compaction"]
    refused = [e for e in entries if e.error]
    assert refused, "no summary request outgrew the window: the test proves nothing"
    assert all(e.error.startswith("CapacityExceeded") for e in refused if e.error)
    assert all("6,500-token context window" in (e.error or "") for e in refused)


async def test_the_summary_bound_is_a_quarter_of_the_clamped_budget(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    """On a 4,500-token model the owner's history is clamped to what the runtime budget
    leaves (well under 4,500); the summary is bounded by a quarter of that, not by the
    owner's configured 1,500, in the fold's instruction and in what the replies show."""
    model = await owner_chat(tmp_path, messenger, window=4_500, turns=16, words=10)
    folds = [r for r in model.requests if is_summary_request(r)]
    assert folds, "no fold happened: the test proves nothing"
    bounds = {int(m.group(1)) for r in folds if (m := FOLD.search(r.messages[-1].content))}
    assert bounds, folds[-1].messages[-1].content
    assert all(bound <= 4_500 // 4 for bound in bounds), bounds
    for fold in folds:  # the output limit follows the bound too
        assert fold.max_output_tokens is not None
        assert fold.max_output_tokens <= 2 * (4_500 // 4)
