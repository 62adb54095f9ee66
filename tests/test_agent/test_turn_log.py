"""The terminal says what the bot does: one INFO line per handled turn (chat, member, scene,
tokens, time, cost, how it ended), and no word of what anyone wrote."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from adapters.llm.scripted import Reply, ScriptedModel
from tests.fakes import ALICE, inbound
from tests.test_services.test_inbound import GROUP, make


async def test_each_answered_turn_is_one_info_line_without_the_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([Reply("the secret reply words")])
    app, _store, _messenger, clock = make(tmp_path, model)
    caplog.set_level(logging.INFO, logger="tgbot.turns")
    await app.inbound.on_message(
        inbound(
            message_id=1, text="@Helper the secret question", at=clock.now(),
            chat_id=GROUP, sender=ALICE, mentions_bot=True,
        )
    )  # fmt: skip
    await app.inbound.drain()
    lines = [r.getMessage() for r in caplog.records if r.name == "tgbot.turns"]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("turn ")
    assert f"answered: chat {GROUP} (group) member {ALICE.id}; 1 call(s), tokens in " in line
    assert " ms (model " in line
    assert "cost no prices" in line
    assert "secret" not in line
