"""`tgbot doctor` names a scheduled job whose chat the bot cannot reach (getChat, which
sends nothing), and says all are reachable otherwise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.domain.jobs import NewJob
from storage.engine import create_engine_for
from storage.jobs import SqlJobStore
from storage.migrate import upgrade_database
from testkit.fake_bot_api import FakeBotApi
from tests.test_app.test_doctor import TOKEN, _run, clean_env

__all__ = ["clean_env"]

GONE = -100404
HERE = -100200


async def test_a_job_whose_chat_the_bot_cannot_reach_is_a_failed_line(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{clean_env / 'tgbot.sqlite3'}"
    await upgrade_database(url)
    engine = create_engine_for(url)
    now = datetime.now(UTC)
    for chat in (HERE, GONE):
        await SqlJobStore(engine).add_job(
            NewJob(
                chat_id=chat,
                creator_id=1001,
                text="x",
                first_at=now + timedelta(hours=1),
                created_at=now,
            )
        )
    await engine.dispose()
    async with FakeBotApi(TOKEN, username="doc_bot", reads_all_group_messages=True) as api:
        api.user_message(HERE, {"id": 1001, "first_name": "Alice"}, "hi")  # a chat it is in
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        code, lines = await _run()
        assert not api.calls_of("sendMessage")
    (jobs,) = [line for line in lines if line.startswith(("✘ jobs", "✔ jobs"))]
    assert jobs.startswith("✘ jobs: chat -100404 has scheduled j2 but the bot cannot reach it")
    assert jobs.endswith("/jobs cancel j2")
    assert code == 1
