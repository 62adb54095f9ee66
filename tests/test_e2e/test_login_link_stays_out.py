"""The owner's `/dashboard` login link through `tgbot run`: the owner gets it, but no model
request, call trace, ledger line or log line carries it; the next turn is told, in a
redacted form, that the link was sent."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import Reply, ScriptedModel
from bot.ports import LLMResponse
from bot.texts import text
from tests.bot_process import StartBot, reply_stored

pytestmark = pytest.mark.slow

OWNER = {"id": 42, "first_name": "Owner"}
DASHBOARD_TOKEN = "dash-owner-secret-123456"


async def test_the_login_link_never_reaches_the_model(
    bot_running: StartBot, tmp_path: Path
) -> None:
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    api, llm, process, store = await bot_running(
        model,
        BOT_LOCALE="en",
        DASHBOARD_URL="https://ops.example.org/",
        DASHBOARD_TOKEN=DASHBOARD_TOKEN,
    )
    api.push_update(api.user_message(42, OWNER, "/dashboard", chat_type="private"))
    await api.wait_for_call("sendMessage", 1)
    (sent,) = api.sent_messages(42)
    link = re.search(r"https://ops\.example\.org/\?token=(\S+)", sent["text"])
    assert link is not None, sent["text"]
    token = link.group(1)

    model.add(Reply("noted"))
    api.push_update(api.user_message(42, OWNER, "what did you just send me?", chat_type="private"))
    await reply_stored(api, store, 42, 2)
    request = from_request(llm.requests[-1])
    carried = "\n".join(message.content for message in request.messages)
    assert "?token=" not in carried  # not even a cut-off part of it (told lines are cut)
    assert token[:12] not in carried
    assert "[Already told the user]" in carried
    assert text("en", "dashboard_link_told") in carried
    await process.stop()
    assert not files_holding(tmp_path, token[:12].encode())
    assert token[:12] not in process.log()


def files_holding(data_dir: Path, needle: bytes) -> list[Path]:
    """Files under `data_dir` (ledger, traces unzipped, database, logs) holding `needle`."""
    found = []
    for path in data_dir.rglob("*"):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        if needle in raw:
            found.append(path)
    return found
