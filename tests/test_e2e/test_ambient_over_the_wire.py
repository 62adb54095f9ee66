"""Issue 48, ambient mode through `tgbot run`: the judge is asked only past the fixed gates,
`skip` sends nothing, `reply` answers as a normal turn, the cooldown and the daily maximum
hold, another bot's message never reaches the judge, and the judge never sees more than its
cap (docs/groups.md, Ambient mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.context.tokens import estimate_message_tokens
from bot.ports import LLMRequest, LLMResponse
from bot.services.ambient import JUDGE_PROMPT
from tests.bot_process import StartBot, eventually, reply_stored

pytestmark = pytest.mark.slow

WORK = -1001110000148
QUIZ = -1002220000148
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
OTHER_BOT = {"id": 5005, "is_bot": True, "first_name": "Echo", "username": "echo_bot"}
CAP = 300

CONFIG = f"""
[triggers]
merge_window_seconds = 0
ambient_settle_seconds = 0.2
ambient_judge_max_tokens = {CAP}

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0

[chats."{WORK}".triggers]
ambient = "judge"

[chats."{QUIZ}".triggers]
ambient = "judge"
ambient_cooldown_seconds = 0
ambient_daily_max = 1
"""


def is_judge(request: LLMRequest) -> bool:
    return str(request.messages[0].content) == JUDGE_PROMPT


def responder(request: LLMRequest) -> LLMResponse:
    """The judge says reply to a question and skip to the rest; a turn answers."""
    if is_judge(request):
        transcript = str(request.messages[-1].content)
        newest = transcript.split("\n\nreply or skip?")[0].splitlines()[-1]
        return LLMResponse(text="reply" if newest.endswith("?") else "skip")
    return LLMResponse(text="Here is what I know.")


def decisions(data_dir: Path) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for path in sorted((data_dir / "ambient").glob("*.jsonl")):
        found += [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return found


async def test_the_judge_decides_past_the_gates_and_a_reply_is_a_turn(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=responder)
    api, _llm, bot, store = await bot_running(model, config=CONFIG)
    data = bot.data_dir

    def say(chat: int, sender: dict[str, object], text: str) -> None:
        api.push_update(api.user_message(chat, sender, text, chat_title="Group"))

    async def decided(count: int) -> None:
        async def enough() -> bool:
            return len(decisions(data)) >= count

        await eventually(enough)

    say(WORK, ALICE, "nice weather " * 400)  # long and no question: the judge skips
    await decided(1)
    say(WORK, OTHER_BOT, "does anyone know the release date?")  # a bot: never judged
    await decided(2)
    say(WORK, ALICE, "when is the release?")
    await reply_stored(api, store, WORK, 1)
    await decided(3)
    say(WORK, ALICE, "and the deadline?")  # within the cooldown
    await decided(4)
    say(QUIZ, ALICE, "first question?")
    await reply_stored(api, store, QUIZ, 1)
    await decided(5)
    say(QUIZ, ALICE, "second question?")  # over the daily maximum of 1
    await decided(6)

    made = [(d["chat"], d["outcome"], d["by"]) for d in decisions(data)]
    assert made == [
        (WORK, "skip", "judge"),
        (WORK, "skip", "bot"),
        (WORK, "reply", "judge"),
        (WORK, "skip", "cooldown"),
        (QUIZ, "reply", "judge"),
        (QUIZ, "skip", "daily_max"),
    ]
    judged = [r for r in model.requests if is_judge(r)]
    assert len(judged) == 3  # only past the gates
    for request in judged:
        assert sum(estimate_message_tokens(m) for m in request.messages) <= CAP
        assert "release date" not in str(request.messages[-1].content)  # the bot's, unseen
        assert request.tools == ()
    turns = [r for r in model.requests if not is_judge(r)]
    assert len(turns) == 2
    assert "when is the release?" in str(turns[0].messages[-1].content)
    assert len(api.calls_of("sendMessage")) == 2  # a skip sends nothing

    ledger = [
        json.loads(line)
        for path in (data / "agent-traces").glob("*.jsonl")
        for line in path.read_text("utf-8").splitlines()
    ]
    assert sorted(line["purpose"] for line in ledger).count("judge") == 3
