"""The jobs store's contract (`bot.domain.jobs.JobStore`), the same in memory, on SQLite and
on PostgreSQL: a due run is claimed once (two claimers at once: one gets it), a repeat's
next run is set at the claim counted from now (missed periods run once), a cancelled job
has nothing pending, a run killed mid-send is failed, not sent again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.domain.jobs import JobStore, NewJob
from bot.services.local_jobs import LocalJobStore
from storage.engine import create_engine_for
from storage.executor import Database
from storage.jobs import SqlJobStore
from tests.test_storage.conftest import BACKENDS, database_url

NOW = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)


class Opened:
    def __init__(self, url: str | None) -> None:
        self.url = url
        self.databases: list[Database] = []
        self.memory = LocalJobStore()

    def again(self) -> JobStore:
        """Another worker's store. The first one polls through its `Database`'s whole jobs,
        as `tgbot run` opens it; the others through SQLAlchemy, as `tgbot doctor` does."""
        if self.url is None:
            return self.memory
        database = Database(create_engine_for(self.url))
        self.databases.append(database)
        polls = database if len(self.databases) == 1 else None
        return SqlJobStore(database.engine, database=polls)

    async def close(self) -> None:
        for database in self.databases:
            await database.close()


@pytest.fixture(params=BACKENDS)
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    url = None if request.param == "memory" else await database_url(request.param, tmp_path)
    opened = Opened(url)
    try:
        yield opened
    finally:
        await opened.close()


def new_job(at: datetime, *, repeat: str | None = None, chat: int = -100) -> NewJob:
    return NewJob(
        chat_id=chat,
        creator_id=7,
        creator_name="Alice",
        text="stand-up!",
        repeat=repeat,
        zone="Asia/Shanghai",
        first_at=at,
        created_at=NOW,
    )


async def test_a_due_run_is_claimed_once_and_finished_with_its_message_id(opened: Opened) -> None:
    store = opened.again()
    job = await store.add_job(new_job(NOW + timedelta(minutes=1)))
    assert job.name == f"j{job.id}"
    assert job.next_at == NOW + timedelta(minutes=1)
    assert await store.claim_due(NOW, "w1") == ()  # not due yet
    (claimed,) = await store.claim_due(NOW + timedelta(minutes=1), "w1")
    assert claimed.job.id == job.id
    assert claimed.run.attempts == 1
    assert await store.claim_due(NOW + timedelta(minutes=2), "w2") == ()
    await store.finish_run(claimed.run.id, "delivered", NOW, message_id=555)
    (run,) = await store.runs(job_id=job.id)
    assert (run.status, run.message_id) == ("delivered", 555)
    done = await store.get_job(job.id)
    assert done is not None
    assert done.status == "done"
    assert done.next_at is None
    assert await store.list_jobs(chat_id=-100) == ()


async def test_two_claimers_at_once_get_a_run_once(opened: Opened) -> None:
    first, second = opened.again(), opened.again()
    for minute in range(5):
        await first.add_job(new_job(NOW + timedelta(seconds=minute)))
    late = NOW + timedelta(minutes=1)
    a, b = await asyncio.gather(first.claim_due(late, "w1"), second.claim_due(late, "w2"))
    ids = [c.run.id for c in (*a, *b)]
    assert len(ids) == 5
    assert len(set(ids)) == 5


async def test_a_repeat_gets_its_next_run_at_the_claim_and_missed_periods_run_once(
    opened: Opened,
) -> None:
    store = opened.again()
    at = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)  # 09:00 in Shanghai
    job = await store.add_job(new_job(at, repeat="daily"))
    three_days_later = at + timedelta(days=3, hours=2)
    (claimed,) = await store.claim_due(three_days_later, "w1")
    assert claimed.run.due_at == at
    assert claimed.job.next_at == at + timedelta(days=4)  # after now, not each missed day
    assert await store.claim_due(three_days_later, "w1") == ()
    (again,) = await store.claim_due(at + timedelta(days=4), "w1")
    assert again.run.due_at == at + timedelta(days=4)
    assert len(await store.runs(job_id=job.id)) == 3  # the two claimed and the next one


async def test_retry_puts_a_run_back_and_cancel_drops_what_is_pending(opened: Opened) -> None:
    store = opened.again()
    job = await store.add_job(new_job(NOW, repeat="weekly"))
    (claimed,) = await store.claim_due(NOW, "w1")
    await store.retry_run(claimed.run.id, NOW + timedelta(seconds=30), "429")
    assert await store.claim_due(NOW + timedelta(seconds=10), "w1") == ()
    (retried,) = await store.claim_due(NOW + timedelta(seconds=30), "w1")
    assert retried.run.id == claimed.run.id
    assert retried.run.attempts == 2
    assert retried.job.next_at == NOW + timedelta(days=7)  # not advanced twice
    assert await store.cancel_job(job.id, NOW)
    assert not await store.cancel_job(job.id, NOW)
    assert await store.claim_due(NOW + timedelta(days=8), "w1") == ()
    cancelled = await store.get_job(job.id)
    assert cancelled is not None
    assert cancelled.status == "cancelled"


async def test_next_due_is_the_earliest_run_waiting_to_be_claimed(opened: Opened) -> None:
    store = opened.again()
    assert store.shared == (opened.url is not None and opened.url.startswith("postgresql"))
    assert await store.next_due() is None
    later = await store.add_job(new_job(NOW + timedelta(hours=2)))
    weekly = await store.add_job(new_job(NOW, repeat="weekly"))
    assert await store.next_due() == NOW
    (claimed,) = await store.claim_due(NOW, "w1")
    assert await store.next_due() == NOW + timedelta(hours=2)  # a claimed run waits no more
    await store.retry_run(claimed.run.id, NOW + timedelta(seconds=30), "429")
    assert await store.next_due() == NOW + timedelta(seconds=30)
    await store.cancel_job(weekly.id, NOW)
    assert await store.next_due() == NOW + timedelta(hours=2)
    await store.cancel_job(later.id, NOW)
    assert await store.next_due() is None


async def test_a_run_interrupted_mid_send_is_failed_not_sent_again(opened: Opened) -> None:
    store = opened.again()
    await store.add_job(new_job(NOW))
    (_claimed,) = await store.claim_due(NOW, "w1")
    restarted = opened.again()
    assert await restarted.release_interrupted(NOW + timedelta(seconds=1), NOW) == 1
    assert await restarted.claim_due(NOW + timedelta(hours=1), "w2") == ()
    (run,) = await restarted.runs()
    assert run.status == "failed"
    assert run.error is not None
    assert "interrupted" in run.error
