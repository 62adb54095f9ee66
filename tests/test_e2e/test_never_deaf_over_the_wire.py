"""Issue 49: never silently deaf. A fake Bot API whose `getUpdates` hangs: `tgbot run`
abandons each hung poll and asks again, `/healthz` (the dashboard beside the bot) turns 503
with the reason within its bound, `/metrics` shows how long ago updates were read, and once
the API answers again the message sent meanwhile is answered: no update is lost."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import aiohttp
import pytest

from adapters.llm.scripted import ScriptedModel
from tests.bot_process import QUIET_CONFIG, eventually, reply_stored, scripted_bot

pytestmark = pytest.mark.slow

CHAT = 4902
ANN = {"id": CHAT, "first_name": "Ann"}
CONFIG = (
    QUIET_CONFIG
    + """
[telegram]
poll_seconds = 1
poll_grace_seconds = 1
updates_stall_seconds = 2
"""
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_a_hung_get_updates_is_abandoned_reported_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with (
        scripted_bot(tmp_path, ScriptedModel(), config=CONFIG, DASHBOARD_PORT=str(port)) as run,
        aiohttp.ClientSession() as http,
    ):
        api, _, bot, store = run

        async def health() -> tuple[int, str]:
            async with http.get(f"{base}/healthz") as answer:
                return answer.status, await answer.text()

        async def healthy() -> bool:
            return (await health())[0] == 200

        await eventually(healthy)
        api.delay_next("getUpdates", 3600, times=3)  # three polls hang; stop() ends them
        await api.wait_for_call("getUpdates", len(api.calls_of("getUpdates")) + 1)
        api.push_update(api.user_message(CHAT, ANN, "anyone there?", chat_type="private"))

        async def deaf() -> bool:
            return (await health())[0] == 503

        await eventually(deaf)
        _, reason = await health()
        assert re.fullmatch(r"no getUpdates completed for \d+ s \(bound 2 s\)\n", reason), reason
        async with http.get(f"{base}/metrics") as metrics:
            text = await metrics.text()
        age = re.search(r"^tgbot_last_update_age_seconds (\S+)$", text, re.MULTILINE)
        assert age is not None, text
        assert float(age.group(1)) > 2

        await reply_stored(api, store, CHAT, 1)  # the API answers again: nothing lost
        assert api.sent_messages(CHAT)[0]["text"] == "Noted: anyone there?"
        await eventually(healthy)
        assert bot.log().count("getUpdates did not complete within 2s; abandoned") >= 2
