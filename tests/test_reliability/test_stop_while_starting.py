"""SIGTERM while `tgbot run` is still starting (here: the Bot API has not answered `getMe`
yet): start-up stops, what it had opened (the store, the chat lock, the Bot API client)
closes in reverse order, and the process exits 0 like any stop, instead of dying on the
signal with everything left open."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.deadlines import PROCESS_READY, deadline
from tests.test_reliability.conftest import suite_bot

pytestmark = pytest.mark.slow

HANG = 600.0
"""Longer than any deadline here: `getMe` answers only when the fake server stops."""


async def test_sigterm_during_start_up_closes_what_was_opened(
    api: FakeBotApi, llm: FakeOpenAIServer, tmp_path: Path
) -> None:
    api.delay_next("getMe", HANG)
    bot = suite_bot(api, llm, tmp_path)
    starting = asyncio.create_task(bot.start())
    await api.wait_for_call("getMe", 1, timeout=deadline(PROCESS_READY))

    code = await bot.stop()  # SIGTERM while start-up waits for getMe

    with pytest.raises(AssertionError, match="before it polled"):
        await starting
    log = bot.log()
    assert code == 0, bot.log_tail()
    assert "stop signal during start-up" in log
    assert log.rstrip().endswith("stopped"), bot.log_tail()
    assert "Unclosed" not in log  # the Bot API client's session was closed, not dropped
    assert api.calls_of("getUpdates") == []  # it never started taking updates
