"""The question and the reply of a turn on the chat page, read from its calls' traces: also
from a call made over HTTP, whose trace keeps the body as sent (`wire_request`) and leaves
`request` empty. The conversation page: a time column, newest first as it says, and a
private chat named for its member."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.agent.ledger import LedgerEntry
from bot.agent.trace_reader import trace_path
from bot.agent.traces import encode_trace
from bot.app.dashboard.calls import turn_texts
from bot.app.dashboard.views import TurnCalls
from bot.app.demo_scenario import OWNER_ID
from tests.test_app.test_dashboard.conftest import DemoData

Client = TestClient[web.Request, web.Application]

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CALL_ID = "20260301-00000000beef"
MEMBER_LINE = "[id:m7;user:Alice;user_id:1001;]\n@helper when is the demo?"
BLOCKS = "\n\n[Turn context]\nnow: 2026-03-01 12:00"

OPENAI_WIRE = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You are a helper."},
        {"role": "user", "content": "[id:3;user_id:1002;name:Bob] earlier words"},
        {"role": "assistant", "content": "an earlier reply"},
        {"role": "user", "content": MEMBER_LINE + BLOCKS},
    ],
}
ANTHROPIC_WIRE = {
    "model": "m",
    "system": [{"type": "text", "text": "You are a helper."}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": MEMBER_LINE, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": BLOCKS},
            ],
        }
    ],
}


def _turn(traces: Path, trace: dict[str, Any]) -> TurnCalls:
    path = trace_path(traces, CALL_ID)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_trace(trace))
    entry = LedgerEntry(
        ts=AT, session=1, chat=-100, scene="group", turn_id="t1", provider="p", model="m",
        call_id=CALL_ID,
    )  # fmt: skip
    return TurnCalls(turn_id="t1", started=AT, calls=(entry,))


@pytest.mark.parametrize("wire", [OPENAI_WIRE, ANTHROPIC_WIRE], ids=["openai", "anthropic"])
def test_a_call_over_http_shows_the_members_question(tmp_path: Path, wire: dict[str, Any]) -> None:
    trace = {
        "call_id": CALL_ID,
        "request": None,
        "dialect": "openai" if wire is OPENAI_WIRE else "anthropic",
        "wire_request": wire,
        "response": {"text": "Thursday at 10."},
    }
    turn = _turn(tmp_path, trace)
    assert turn_texts(tmp_path, [turn]) == {"t1": ("@helper when is the demo?", "Thursday at 10.")}


async def test_the_conversation_is_newest_first_with_times_and_a_private_chat_has_its_name(
    demo_data: DemoData, client: Client
) -> None:
    page = await (await client.get(f"/chats/{OWNER_ID}/conversation")).text()
    assert "newest first" in page
    assert f"Olga ({OWNER_ID})</a></h1>" in page  # the member's name, not just an id
    table = page.split('id="conversation"')[1].split("</table>")[0]
    assert '<th class="l">time</th><th class="l">alias</th>' in table
    times = re.findall(r'<tr><td class="l">([^<]+)</td><td class="l"><code>', table)
    assert len(times) >= 2
    assert times == sorted(times, reverse=True)  # newest first, as the heading says


def test_a_scheduled_task_s_turn_shows_its_instruction_as_the_question(tmp_path: Path) -> None:
    task = (
        "[Scheduled task]\njob: j3\nset by: Alice (user_id:1001)\ndue: 2026-03-01 12:00 (UTC)"
        "\nrepeat: once\nNo member wrote to you for this turn.\ninstruction:\n"
        "Post the weekly digest." + BLOCKS
    )
    wire = {
        **OPENAI_WIRE,
        "messages": [*OPENAI_WIRE["messages"], {"role": "user", "content": task}],
    }
    trace = {
        "call_id": CALL_ID,
        "request": None,
        "wire_request": wire,
        "response": {"text": "Digest."},
    }
    turn = _turn(tmp_path, trace)
    job = TurnCalls(
        turn_id="t1", started=AT, calls=tuple(replace(c, purpose="job") for c in turn.calls)
    )
    assert turn_texts(tmp_path, [job]) == {"t1": ("Post the weekly digest.", "Digest.")}
