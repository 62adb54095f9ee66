"""The chat page lists the facts the model keeps in that chat (the owner's view), escaped;
a deleted fact is gone from the page and from the request it previews."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from bot.app.dashboard.server import build_application, open_dashboard
from bot.app.demo_scenario import GROUP_CHAT
from bot.config import load_settings
from bot.context.memory_block import CHAT_WIDE, MemoryFact
from storage.engine import create_engine_for
from storage.memory_facts import SqlMemoryFacts
from tests.test_app.conftest import DemoRun

PREVIEW = re.compile(r'<pre class="preview" id="preview">(.*?)</pre>', re.DOTALL)
FACTS = re.compile(r'<table class="grid-table" id="memory-facts">(.*?)</table>', re.DOTALL)


async def test_the_chat_page_lists_its_facts_and_forgets_a_deleted_one(
    demo_run: DemoRun, tmp_path: Path
) -> None:
    data_dir = demo_run.copy_to(tmp_path / "demo")
    settings = load_settings(data_dir=data_dir, bot_locale="en")
    engine = create_engine_for(settings.resolved_database_url)
    facts = SqlMemoryFacts(engine)
    at = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
    kept = []
    for chat, member, text in (
        (GROUP_CHAT, CHAT_WIDE, "stand-up <b>at 10</b>"),
        (GROUP_CHAT, 1001, "Alice leads the demo"),
        (4242, 4242, "ELSEWHERE private fact"),
    ):
        added = await facts.add_fact(
            chat_id=chat,
            member_id=member,
            author_id=member or 42,
            text=text,
            created_at=at,
            per_member=50,
            per_chat=100,
        )
        assert isinstance(added, MemoryFact)
        kept.append(added)
    board = open_dashboard(settings)
    try:
        async with TestClient(TestServer(build_application(board))) as client:
            page = await (await client.get(f"/chats/{GROUP_CHAT}")).text()
            table = FACTS.search(page)
            assert table is not None
            rows = table.group(1)
            assert "<b>at 10</b>" not in page  # escaped
            assert "stand-up &lt;b&gt;at 10&lt;/b&gt;" in rows
            assert "Alice leads the demo" in rows
            assert "user_id 1001" in rows
            assert "ELSEWHERE" not in page  # another chat's fact
            preview = PREVIEW.search(page)
            assert preview is not None
            assert f"- {kept[0].alias}: stand-up" in html.unescape(preview.group(1))

            await facts.delete_facts(GROUP_CHAT, [kept[0].id])
            page = await (await client.get(f"/chats/{GROUP_CHAT}")).text()
            assert "stand-up" not in page
    finally:
        await board.store.close()
        await engine.dispose()
