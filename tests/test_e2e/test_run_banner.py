"""`tgbot run` says once, on start, what it runs against."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from tests.bot_process import StartBot

pytestmark = pytest.mark.slow


async def test_run_logs_one_banner_line(bot_running: StartBot, tmp_path: Path) -> None:
    api, llm, bot, _store = await bot_running(ScriptedModel())
    assert await bot.stop() == 0
    banners = [line for line in bot.log().splitlines() if " started; " in line]
    assert len(banners) == 1, bot.log()
    assert banners[0].endswith(
        f"bot @{api.username} started; polling {api.base_url}; model default:fake-model at "
        f"{llm.base_url}; database sqlite+aiosqlite:///{tmp_path}/tgbot.sqlite3; "
        f"DATA_DIR={tmp_path}; dashboard off (DASHBOARD_PORT unset)"
    )
