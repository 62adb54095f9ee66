"""The dashboard's `/jobs` page (who set each job, its next run, its past runs with the
message id Telegram returned or its words) and the jobs' lines of `/metrics`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.app.dashboard.server import open_dashboard
from bot.app.wiring import open_store
from bot.config import load_settings
from bot.domain.jobs import NewJob
from storage.jobs import SqlJobStore
from storage.sql import SqlStore
from tests.test_app.test_dashboard.conftest import serving

NOW = datetime.now(UTC)


async def test_the_jobs_page_and_metrics_show_runs_with_message_ids_and_errors(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, bot_locale="en")
    store = await open_store(settings)
    assert isinstance(store, SqlStore)
    jobs = SqlJobStore(store.engine)
    for chat, text in ((-100, "stand-up"), (-200, "weekly review")):
        await jobs.add_job(
            NewJob(
                chat_id=chat,
                creator_id=1001,
                creator_name="Alice",
                text=text,
                repeat="weekly" if chat == -200 else None,
                zone="Asia/Shanghai",
                first_at=NOW - timedelta(minutes=1),
                created_at=NOW,
            )
        )
    first, second = await jobs.claim_due(NOW, "w")
    await jobs.finish_run(first.run.id, "delivered", NOW, message_id=4711)
    await jobs.finish_run(
        second.run.id, "failed", NOW, error="Forbidden: bot was kicked from the group chat"
    )
    await store.close()

    async with serving(open_dashboard(settings)) as client:
        page = await (await client.get("/jobs")).text()
        metrics = await (await client.get("/metrics")).text()
    assert 'data-job="j1" data-status="done"' in page
    assert 'data-job="j2" data-status="active"' in page  # weekly: its next run is set
    assert "message 4711" in page
    assert "bot was kicked from the group chat" in page
    assert "Alice (1001)" in page
    assert 'tgbot_jobs{status="active"} 1' in metrics
    assert 'tgbot_job_runs{status="delivered"} 1' in metrics
    assert 'tgbot_job_runs{status="failed"} 1' in metrics
    assert 'tgbot_job_runs{status="due"} 1' in metrics
