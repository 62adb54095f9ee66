"""Issue 35: after a context overflow, no request of that turn is larger than the one refused.

`tgbot run` as a subprocess polls `FakeBotApi`; its model is the scripted one behind
`FakeOpenAIServer`, which answers one turn's call with a provider's recorded overflow body
(tests/fixtures/llm/<provider>/overflow*.json, each with its source). The recovery drops the
oldest turns and folds only what leaves into the summary, in a request smaller than the one
refused; then it asks again, smaller still. Sizes are our estimate of what reached the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import ScriptedModel, is_summary_request
from bot.context.tokens import estimate_history_tokens
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from tests.bot_process import StartBot, reply_stored

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
BODIES = {
    f"{path.parent.name}/{path.stem}": json.loads(path.read_text(encoding="utf-8"))
    for path in sorted(FIXTURES.glob("*/overflow*.json"))
}
CHAT = 3501  # a private chat: Ann's own id
ANN = {"id": CHAT, "first_name": "Ann"}
TOPIC = "the rollout plan for the billing service needs a second look at the database step "


def wire_tokens(body: dict[str, Any]) -> int:
    """Our estimate of a request as it reached the fake server: messages and tool schemas."""
    request = from_request(body)
    schemas = [tool.schema() for tool in request.tools]
    return estimate_history_tokens(request.messages) + estimate_tool_schema_tokens(schemas)


def ledger(data_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((data_dir / "agent-traces").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]


@pytest.mark.parametrize("name", BODIES)
async def test_after_an_overflow_every_request_of_the_turn_is_smaller(
    bot_running: StartBot, tmp_path: Path, name: str
) -> None:
    fixture = BODIES[name]
    assert fixture.get("source"), name
    api, llm, _, store = await bot_running(ScriptedModel(), BOT_LOCALE="en")
    for n in range(4):
        api.push_update(api.user_message(CHAT, ANN, f"{n}: {TOPIC * 40}", chat_type="private"))
        await reply_stored(api, store, CHAT, n + 1)
    before = len(llm.requests)
    llm.fail_next(fixture["status"], fixture["body"])
    api.push_update(api.user_message(CHAT, ANN, "so what do we do first?", chat_type="private"))
    await reply_stored(api, store, CHAT, 5)

    assert api.sent_messages(CHAT)[-1]["text"].startswith("Noted: so what do we do first?")
    refused, *after = llm.requests[before:]
    # the summary of what leaves, then the retry: both smaller than what was refused
    # (measured: 4,794 refused, then 3,202 and 3,193; before issue 35 the summary request
    # repeated the whole window, 4,914)
    assert [is_summary_request(from_request(body)) for body in after] == [True, False]
    sizes = [wire_tokens(body) for body in after]
    assert all(size < wire_tokens(refused) for size in sizes), (wire_tokens(refused), sizes)
    # exactly one call was refused, none failed before sending
    lines = ledger(tmp_path)
    turn = [line for line in lines if line["turn_id"] == lines[-1]["turn_id"]]
    (error,) = [line["error"] for line in turn if line["error"]]
    assert error.startswith("ContextOverflow")
    assert [t["reason"] for t in turn[-1]["trims"]] == ["overflow_recovery"]
