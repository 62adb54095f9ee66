"""Two real `tgbot run --webhook` workers on one PostgreSQL, both polling for due jobs every
50 ms: each scheduled post is sent once, by whichever worker claimed it, and recorded
delivered with the message id Telegram returned."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.domain.jobs import NewJob
from storage.engine import create_engine_for
from storage.jobs import SqlJobStore
from testkit.fake_bot_api import FakeBotApi
from tests.bot_process import eventually
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.workers import Worker, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CHATS = [-100_900 - n for n in range(6)]


async def test_two_workers_send_each_due_post_once(tmp_path: Path) -> None:
    url = await fresh_postgres()
    engine = create_engine_for(url)
    jobs = SqlJobStore(engine)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(engine.dispose)
        api = await stack.enter_async_context(FakeBotApi(username="test_bot"))
        workers = [
            Worker(
                name,
                worker_env(
                    api,
                    tmp_path / name,
                    DATABASE_URL=url,
                    JOBS__POLL_SECONDS="0.05",
                    SCHEDULE__DAILY_SUMMARY="false",
                ),
            )
            for name in ("w1", "w2")
        ]
        for worker in workers:
            await worker.start()
            stack.push_async_callback(worker.kill)
        due = datetime.now(UTC) + timedelta(seconds=2)
        for chat in CHATS:
            await jobs.add_job(
                NewJob(
                    chat_id=chat,
                    creator_id=1001,
                    text=f"post for {chat}",
                    zone="Asia/Shanghai",
                    first_at=due,
                    created_at=datetime.now(UTC),
                )
            )

        async def all_finished() -> bool:
            runs = await jobs.runs()
            return len(runs) == len(CHATS) and all(r.status == "delivered" for r in runs)

        await eventually(all_finished)
        await asyncio.sleep(1)  # twenty more polls of each worker: nothing is sent again
        for chat in CHATS:
            (sent,) = api.sent_messages(chat)
            assert sent["text"] == f"post for {chat}"
            assert int(sent["date"]) >= int(due.timestamp())
        by_id = {r.job_id: r for r in await jobs.runs()}
        sent_ids = {api.sent_messages(chat)[0]["message_id"] for chat in CHATS}
        assert {r.message_id for r in by_id.values()} == sent_ids
        for worker in workers:
            assert await worker.stop() == 0, worker.output
