"""Traces through `tgbot run`: a call that asked for a tool is held until the next call
brings the tool's result; a stop in between (SIGTERM while the next call is still out,
the turn cancelled after its grace) still writes it before the process exits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.llm.scripted import CallTool, Hold, Reply, ScriptedModel
from bot.agent.ledger_read import read_entries
from bot.agent.trace_reader import read_trace
from tests.bot_process import QUIET_CONFIG, StartBot
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

CHAT = -1007770042
ALICE = {"id": 1001, "first_name": "Alice"}


async def test_a_stop_in_the_middle_of_a_tool_turn_keeps_the_held_trace(
    bot_running: StartBot, tmp_path: Path
) -> None:
    release = asyncio.Event()
    second = Hold(release, Reply("found it"))
    model = ScriptedModel([CallTool("inspect_conversation_reference", {"reference": "m1"}), second])
    config = QUIET_CONFIG + "\n[runtime]\nshutdown_grace_seconds = 0\n"
    api, _llm, bot, _store = await bot_running(model, config=config)
    try:
        api.push_update(api.user_message(CHAT, ALICE, "@test_bot what did I say?"))
        await asyncio.wait_for(second.arrived.wait(), deadline(EVENT))
        assert await bot.stop() == 0
    finally:
        release.set()
    traces = tmp_path / "agent-traces"
    asked = [e for e in read_entries(traces) if e.tool_calls]
    assert len(asked) == 1, bot.log_tail()
    trace = read_trace(traces, asked[0].call_id)
    assert trace is not None, "written at the stop, not lost with the held turn"
    assert trace["response"]["tool_calls"][0]["name"] == "inspect_conversation_reference"
