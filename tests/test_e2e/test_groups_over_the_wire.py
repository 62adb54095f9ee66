"""Issue 48 through `tgbot run`: each group on its own terms (`[chats."<id>"]`), wake words,
other bots, and a catastrophic pattern refused at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from tests.bot_process import QUIET_CONFIG, ROOT, StartBot, reply_stored

pytestmark = pytest.mark.slow

WORK = -1001110000048
FAMILY = -1002220000048
QUIET = -1003330000049
THREAD = 7
ALICE = {"id": 1001, "is_bot": False, "first_name": "Alice"}
OTHER_BOT = {"id": 5005, "is_bot": True, "first_name": "Echo", "username": "echo_bot"}


def config(tmp_path: Path) -> str:
    persona = tmp_path / "work-persona.md"
    persona.write_text("You are the release desk of ACME. Sign every answer -- RD.", "utf-8")
    return f"""{QUIET_CONFIG}
[chats."{WORK}"]
persona_file = "{persona.as_posix()}"
route = "work-model"

[chats."{WORK}".tools]
deny = ["set_reaction"]

[chats."{WORK}".triggers]
keywords = ["deploy", "部署"]
patterns = ['\\bINC-\\d+']

[chats."{FAMILY}".triggers]
answer_bots = true

[chats."{QUIET}"]
enabled = false
"""


def system_of(model: ScriptedModel, index: int) -> str:
    return str(model.requests[index].messages[0].content)


def tools_of(model: ScriptedModel, index: int) -> set[str]:
    return {spec.name for spec in model.requests[index].tools}


async def test_a_chats_persona_route_and_tools_reach_only_its_requests_and_its_topics(
    bot_running: StartBot, tmp_path: Path
) -> None:
    model = ScriptedModel()
    api, _llm, _bot, store = await bot_running(model, config=config(tmp_path))
    api.push_update(api.user_message(WORK, ALICE, "@test_bot status?", chat_title="Work"))
    await reply_stored(api, store, WORK, 1)
    api.push_update(
        api.user_message(WORK, ALICE, "@test_bot in the topic", chat_title="Work", thread_id=THREAD)
    )
    await reply_stored(api, store, WORK, 2)
    api.push_update(api.user_message(QUIET, ALICE, "@test_bot anyone?", chat_title="Quiet"))
    api.push_update(api.user_message(FAMILY, ALICE, "@test_bot dinner?", chat_title="Family"))
    await reply_stored(api, store, FAMILY, 1)
    assert not api.sent_messages(QUIET)  # enabled = false: stored, never answered
    assert len(model.requests) == 3

    work, topic, family = 0, 1, 2
    for index in (work, topic):
        assert system_of(model, index).endswith(
            "[Persona for this chat]\nYou are the release desk of ACME. Sign every answer -- RD."
        )
        assert model.requests[index].model == "work-model"
        assert "set_reaction" not in tools_of(model, index)
    assert "release desk" not in system_of(model, family)
    assert model.requests[family].model != "work-model"
    assert "set_reaction" in tools_of(model, family)


async def test_a_keyword_and_a_pattern_start_a_turn_and_a_near_miss_does_not(
    bot_running: StartBot, tmp_path: Path
) -> None:
    model = ScriptedModel()
    api, _llm, _bot, store = await bot_running(model, config=config(tmp_path))
    say = lambda text: api.push_update(api.user_message(WORK, ALICE, text, chat_title="Work"))  # noqa: E731
    say("we redeployed yesterday")  # near-miss: not the whole word
    say("can we DEPLOY today?")
    await reply_stored(api, store, WORK, 1)
    say("INC42 is closed")  # near-miss of the pattern
    say("what about INC-42?")
    await reply_stored(api, store, WORK, 2)
    say("今天部署吗")  # a keyword inside unspaced Chinese
    await reply_stored(api, store, WORK, 3)
    answered = [str(r.messages[-1].content) for r in model.requests]
    assert len(answered) == 3
    assert "can we DEPLOY today?" in answered[0]
    assert "what about INC-42?" in answered[1]
    assert "今天部署吗" in answered[2]
    assert not any("redeployed" in a.split("\n\n[Turn context]")[0][-40:] for a in answered)


async def test_other_bots_trigger_only_where_allowed_and_a_loop_stops(
    bot_running: StartBot, tmp_path: Path
) -> None:
    model = ScriptedModel()
    api, _llm, _bot, store = await bot_running(model, config=config(tmp_path))
    api.push_update(api.user_message(WORK, OTHER_BOT, "@test_bot ping", chat_title="Work"))
    api.push_update(api.user_message(WORK, ALICE, "@test_bot are you there?", chat_title="Work"))
    await reply_stored(api, store, WORK, 1)
    for round_ in range(3):  # answer_bots = true in the family chat: answered, one by one
        api.push_update(
            api.user_message(FAMILY, OTHER_BOT, f"@test_bot round {round_}", chat_title="Family")
        )
        await reply_stored(api, store, FAMILY, round_ + 1)
    api.push_update(api.user_message(FAMILY, OTHER_BOT, "@test_bot round 3", chat_title="Family"))
    api.push_update(api.user_message(FAMILY, ALICE, "@test_bot and me?", chat_title="Family"))
    await reply_stored(api, store, FAMILY, 4)
    currents = [str(r.messages[-1].content).split("[Turn context]")[0] for r in model.requests]
    assert len(currents) == 5
    assert "are you there?" in currents[0]  # the other bot's ping never started a turn
    assert [("round" in c) for c in currents[1:]] == [True, True, True, False]
    assert "and me?" in currents[-1]  # the fourth round in ten minutes was not answered


def test_a_catastrophic_pattern_is_refused_at_start_up_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bot.toml"
    path.write_text(f"[chats.\"{WORK}\".triggers]\npatterns = ['(a+)+$']\n", encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "BOT_TOKEN": "123456:test-token",
        "BOT_CONFIG": str(path),
        "DATA_DIR": str(tmp_path / "data"),
        "LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "LLM_API_KEY": "sk-test",
    }
    done = subprocess.run(
        [sys.executable, "-m", "bot.app.cli", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f'chats."{WORK}".triggers.patterns' in lines[0]
    assert "(a+)+$" in lines[0]
