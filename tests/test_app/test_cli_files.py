"""Every `tgbot` command creates its files for the operator alone (0600: the umask is set
where the CLI starts, not only by `run`), and start-up logs no alembic INFO lines."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from tests.bot_process import StartBot, bot_running
from tests.test_app.conftest import cli_env, tgbot

pytestmark = pytest.mark.slow
__all__ = ["bot_running"]  # the fixture, as tests/test_e2e/conftest.py lends it


async def test_db_upgrade_creates_the_database_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = await tgbot("db", "upgrade", env=cli_env(data))
    assert done.code == 0, done.err
    database = data / "tgbot.sqlite3"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert "alembic" not in done.err


async def test_run_at_info_logs_no_alembic_lines(bot_running: StartBot) -> None:
    _api, _llm, bot, _store = await bot_running(ScriptedModel(), TGBOT_LOG_LEVEL="INFO")
    assert await bot.stop() == 0
    log = bot.log()
    assert " started; " in log
    assert "alembic" not in log, log
