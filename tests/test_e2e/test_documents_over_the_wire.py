"""`read_document` through `tgbot run` against the fake Bot API: a PDF and a CSV a member
posted are read by their aliases; a 30 MB file is refused without being downloaded, and the
turn is answered."""

from __future__ import annotations

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.ports import LLMResponse
from tests.bot_process import StartBot, eventually, reply_stored
from tests.documents import text_pdf

pytestmark = pytest.mark.slow

CHAT = -1007770003
ALICE = {"id": 1001, "first_name": "Alice"}


async def test_a_pdf_and_a_csv_are_read_and_a_huge_file_refused(bot_running: StartBot) -> None:
    model = ScriptedModel(default=lambda _r: LLMResponse(text="ok"))
    api, _llm, _bot, store = await bot_running(model)
    posted = [
        ("report.pdf", "application/pdf", text_pdf(["Q3 revenue 4.2M", "Q3 costs 3.1M"]), None),
        ("sales.csv", "text/csv", b"region,amount\nnorth,12\nsouth,7\n", None),
        ("video.mp4", "video/mp4", b"x" * 64, 30 * 1024 * 1024),
    ]
    for index, (name, mime, data, declared) in enumerate(posted):
        api.push_update(
            api.media_message(
                CHAT, ALICE, "", kind="document", data=data, file_id=f"BQAD-{index}",
                file_name=name, mime_type=mime, declared_size=declared, message_id=900 + index,
            )
        )  # fmt: skip

    async def stored() -> bool:
        return await store.find_platform_message(CHAT, 902) is not None

    await eventually(stored)
    model.add(
        CallTool("read_document", {"reference": "m1"}),
        CallTool("read_document", {"reference": "m2"}),
        CallTool("read_document", {"reference": "m3"}),
        Reply("revenue 4.2M; north sold most"),
    )
    api.push_update(api.user_message(CHAT, ALICE, "@test_bot summarise the files", message_id=903))
    await reply_stored(api, store, CHAT, 1)

    results = [m.content for m in model.requests[3].messages if m.role == "tool"]
    assert results[0].startswith("[document m1: report.pdf, PDF, 2 pages; pages 1-2 shown]")
    assert "--- page 1 ---\nQ3 revenue 4.2M" in results[0]
    assert results[1] == (
        "[document m2: sales.csv, 31 characters]\nregion,amount\nnorth,12\nsouth,7\n"
    )
    assert results[2] == "error[unreadable]: m3: the file is 30.0 MB, over the 20.0 MB limit"
    assert [d for d in api.downloads if d.endswith("BQAD-2")] == []  # never fetched
    assert api.sent_messages(CHAT)[0]["text"] == "revenue 4.2M; north sold most"
