"""`[Already told the user]` (issue 17): what services sent outside model turns reaches the
next model turn in that chat, once, on its current message."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel, is_summary_request
from bot.services.messenger_relay import ToldUser, ToldUserLog
from bot.services.told_lines import SecretText, told_line
from tests.fakes import ALICE, RecordingMessenger
from tests.test_agent.rig import make_app, say

TOLD = "[Already told the user]"


@pytest.fixture
def messenger() -> RecordingMessenger:
    return RecordingMessenger()


async def test_a_command_reply_is_told_to_the_next_turn_only(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel()
    app, _store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "/context", command="context", sender=ALICE)
    shown = messenger.sent[-1].text
    await say(app, clock, 2, "@Helper what did you just say?", mentions_bot=True)
    await say(app, clock, 3, "@Helper and now?", mentions_bot=True)
    first, second = [r for r in model.requests if not is_summary_request(r)]
    current = first.messages[-1].content
    assert f"{TOLD}\n- {told_line(shown)}" in current
    assert all(TOLD not in m.content for m in first.messages[:-1])
    assert TOLD not in second.messages[-1].content  # told once
    assert all(TOLD not in m.content for m in second.messages)  # never stored


def test_lines_are_short_one_per_message_and_the_newest_five() -> None:
    log = ToldUserLog()
    for n in range(7):
        log.note(-1, 0, f"report {n}\nsecond line")
    log.note(-1, 0, "x" * 300)
    log.note(-2, 0, "another chat")
    lines = log.take(-1)
    assert len(lines) == 5
    assert lines[0] == "report 3…"  # the first line, marked as cut
    assert lines[-1] == "x" * 119 + "…"
    assert all(len(line) <= 120 for line in lines)
    assert log.take(-1) == ()
    assert log.take(-2) == ("another chat",)


async def test_a_secret_is_retold_only_in_its_redacted_form() -> None:
    book = ToldUser()
    link = SecretText("login: https://ops.example.org/?token=abc123456789", told_as="login sent")
    await book.note(7, 0, link)
    book.log.note(7, 0, SecretText("another https://x/?token=zzz", told_as="another sent"))
    assert await book.peek(7) == ("login sent", "another sent")
