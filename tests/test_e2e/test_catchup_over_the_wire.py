"""Issue 48, `/catchup [hours]` through `tgbot run`: one capped call (`purpose: catchup`)
over what the asker missed, each point linked to the message it comes from."""

from __future__ import annotations

import json

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from bot.services.catchup import CATCHUP_PROMPT
from tests.bot_process import StartBot, eventually

pytestmark = pytest.mark.slow

GROUP = -1004440000048
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
BOB = {"id": 1002, "is_bot": False, "first_name": "Bob"}
CAROL = {"id": 1003, "is_bot": False, "first_name": "Carol"}


async def test_catchup_names_the_messages_it_summarises_by_link(bot_running: StartBot) -> None:
    model = ScriptedModel([Reply("- The release moved to Friday (m2, m3)\n- Cake by Carol (m4)")])
    api, _llm, bot, _store = await bot_running(model)

    def say(sender: dict[str, object], text: str) -> None:
        api.push_update(api.user_message(GROUP, sender, text, chat_title="Team"))

    say(ALICE, "see you all tomorrow")
    say(BOB, "the release moves to Friday")
    say(CAROL, "Friday works for QA")
    say(CAROL, "I'll bring cake")
    say(ALICE, "/catchup 2")
    await api.wait_for_call("sendMessage", 1)
    (request,) = model.requests
    assert str(request.messages[0].content) == CATCHUP_PROMPT
    sent_to_model = str(request.messages[-1].content)
    assert "the release moves to Friday" in sent_to_model
    assert "see you all tomorrow" not in sent_to_model  # the asker's own
    assert request.tools == ()
    reply = json.dumps(api.calls_of("sendMessage")[-1], ensure_ascii=False)
    internal = str(GROUP).removeprefix("-100")
    for message_id in (2, 3, 4):
        assert f"https://t.me/c/{internal}/{message_id}" in reply

    async def ledgered() -> bool:
        lines = [
            json.loads(line)
            for path in (bot.data_dir / "agent-traces").glob("*.jsonl")
            for line in path.read_text("utf-8").splitlines()
        ]
        return [line["purpose"] for line in lines] == ["catchup"]

    await eventually(ledgered)
