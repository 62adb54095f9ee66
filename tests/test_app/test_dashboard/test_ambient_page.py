"""`/ambient`: each ambient decision, newest first, with the gate or the judge that made it."""

from __future__ import annotations

import json
from pathlib import Path

from bot.app.dashboard.server import open_dashboard
from bot.app.wiring import open_store
from bot.config import load_settings
from tests.test_app.test_dashboard.conftest import serving


async def test_the_ambient_page_lists_each_decision_and_what_made_it(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    store = await open_store(settings)  # a migrated database, as a bot leaves it
    await store.close()
    log = tmp_path / "ambient"
    log.mkdir()
    rows = [
        {"at": "2026-12-07T10:00:00+00:00", "chat": -100, "thread": 0, "message": 5,
         "outcome": "skip", "by": "cooldown", "judge_input_tokens": 0},
        {"at": "2026-12-07T10:01:00+00:00", "chat": -100, "thread": 0, "message": 6,
         "outcome": "reply", "by": "judge", "judge_input_tokens": 812},
    ]  # fmt: skip
    (log / "2026-12-07.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows) + "not json\n", encoding="utf-8"
    )
    async with serving(open_dashboard(settings)) as client:
        response = await client.get("/ambient")
        assert response.status == 200
        page = await response.text()
    judge, cooldown = page.index('data-by="judge"'), page.index('data-by="cooldown"')
    assert judge < cooldown  # newest first
    assert "812" in page[judge:cooldown]
    assert 'href="/ambient"' in page
