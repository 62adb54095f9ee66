from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from adapters.scheduler import (
    DAILY_SUMMARY_JOB_ID,
    DAILY_SUMMARY_REF,
    build_scheduler,
    parse_daily_time,
    register_daily_summary,
    run_daily_summary,
)
from bot.services.daily_summary import DailySummary
from testkit.memory_store import InMemoryStore
from tests.deadlines import EVENT, deadline
from tests.fakes import RecordingMessenger, SteppingClock, claimed_days

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 3, 2, 1, 0, tzinfo=UTC)  # 09:00 on 2026-03-02 in Shanghai
DAY = date(2026, 3, 1)


@pytest.fixture(autouse=True)
def _clear_registry() -> Iterator[None]:
    yield
    register_daily_summary(None)


def url(path: Path) -> str:
    return f"sqlite:///{path.as_posix()}"


def build(
    store: Path, job: object, *, daily_time: str = "09:00", grace: int = 3600
) -> AsyncIOScheduler:
    return build_scheduler(
        jobstore_url=url(store),
        zone=SHANGHAI,
        daily_time=daily_time,
        misfire_grace_seconds=grace,
        job=job,  # type: ignore[arg-type]
    )


async def nothing() -> None:
    return None


def watch(scheduler: AsyncIOScheduler) -> tuple[asyncio.Event, list[JobEvent]]:
    done = asyncio.Event()
    seen: list[JobEvent] = []

    def listener(event: JobEvent) -> None:
        seen.append(event)
        done.set()

    scheduler.add_listener(listener, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
    return done, seen


@pytest.mark.parametrize(
    ("text", "expected"),
    [("09:00", (9, 0)), ("23:59", (23, 59)), ("0:05", (0, 5))],
    ids=["morning", "last-minute", "short-hour"],
)
def test_parse_daily_time(text: str, expected: tuple[int, int]) -> None:
    assert parse_daily_time(text) == expected


@pytest.mark.parametrize("text", ["9", "24:00", "12:60", "ab:cd", "", "-1:30"])
def test_parse_daily_time_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="HH:MM"):
        parse_daily_time(text)


async def test_the_job_is_stored_by_reference_with_the_cron_trigger(tmp_path: Path) -> None:
    store = tmp_path / "data" / "scheduler.sqlite3"  # the directory is created
    scheduler = build(store, nothing, daily_time="08:30", grace=600)
    scheduler.start(paused=True)
    try:
        [job] = scheduler.get_jobs()
        assert job.id == DAILY_SUMMARY_JOB_ID
        assert job.func_ref == DAILY_SUMMARY_REF
        assert repr(job.trigger) == (
            "<CronTrigger (hour='8', minute='30', timezone='Asia/Shanghai')>"
        )
        assert (job.coalesce, job.misfire_grace_time, job.max_instances) == (True, 600, 1)
        assert job.next_run_time.tzinfo is not None
        assert (job.next_run_time.hour, job.next_run_time.minute) == (8, 30)
    finally:
        scheduler.shutdown(wait=False)
    assert store.is_file()


async def test_a_restart_keeps_one_job_and_its_next_run_time(tmp_path: Path) -> None:
    store = tmp_path / "scheduler.sqlite3"
    first = build(store, nothing)
    first.start(paused=True)
    planned = datetime.now(SHANGHAI) + timedelta(minutes=7)
    first.modify_job(DAILY_SUMMARY_JOB_ID, next_run_time=planned)
    first.shutdown(wait=False)

    second = build(store, nothing)
    second.start(paused=True)
    try:
        [job] = second.get_jobs()
        assert abs(job.next_run_time - planned) < timedelta(milliseconds=1)
        assert repr(job.trigger) == "<CronTrigger (hour='9', minute='0', timezone='Asia/Shanghai')>"
    finally:
        second.shutdown(wait=False)

    third = build(store, nothing, daily_time="07:15")  # a changed time replaces the job
    third.start(paused=True)
    try:
        [job] = third.get_jobs()
        assert "hour='7', minute='15'" in repr(job.trigger)
        assert (job.next_run_time.hour, job.next_run_time.minute) == (7, 15)
    finally:
        third.shutdown(wait=False)


async def test_a_run_missed_while_down_fires_once_after_restart_and_only_once_per_day(
    tmp_path: Path,
) -> None:
    guard = InMemoryStore()  # stands for the shared database
    ledger = tmp_path / "agent-traces"

    # Process A goes down just before its 09:00 run: the stored run time is now in the past.
    store_a = tmp_path / "worker-a.sqlite3"
    down = build(store_a, nothing)
    down.start(paused=True)
    down.modify_job(
        DAILY_SUMMARY_JOB_ID, next_run_time=datetime.now(SHANGHAI) - timedelta(minutes=5)
    )
    down.shutdown(wait=False)

    # Restarted A fires the missed run (within the grace time) as soon as it starts.
    messenger_a = RecordingMessenger()
    summary_a = DailySummary(ledger, SHANGHAI, 1, messenger_a, guard, SteppingClock(NOW))
    results: list[object] = []

    async def job_a() -> object:
        results.append(await summary_a.send_yesterday())
        return results[-1]

    restarted = build(store_a, job_a)
    done, seen = watch(restarted)
    restarted.start()
    try:
        await asyncio.wait_for(done.wait(), deadline(EVENT))
        [job] = restarted.get_jobs()
        assert job.next_run_time > datetime.now(SHANGHAI)  # rescheduled, not re-run
    finally:
        restarted.shutdown(wait=False)
    assert [e.code for e in seen] == [EVENT_JOB_EXECUTED]
    assert results == [True]
    assert len(messenger_a.sent) == 1
    assert messenger_a.sent[0].text.startswith("2026-03-01")
    assert len(messenger_a.photos) == 1

    # Worker B (its own local job store) fires for the same day: the guard stops it.
    store_b = tmp_path / "worker-b.sqlite3"
    paused_b = build(store_b, nothing)
    paused_b.start(paused=True)
    paused_b.modify_job(
        DAILY_SUMMARY_JOB_ID, next_run_time=datetime.now(SHANGHAI) - timedelta(minutes=1)
    )
    paused_b.shutdown(wait=False)
    messenger_b = RecordingMessenger()
    summary_b = DailySummary(ledger, SHANGHAI, 1, messenger_b, guard, SteppingClock(NOW))
    worker_b = build(store_b, summary_b.send_yesterday)
    done_b, seen_b = watch(worker_b)
    worker_b.start()
    try:
        await asyncio.wait_for(done_b.wait(), deadline(EVENT))
    finally:
        worker_b.shutdown(wait=False)
    assert [e.code for e in seen_b] == [EVENT_JOB_EXECUTED]
    assert seen_b[0].retval is False
    assert (messenger_b.sent, messenger_b.photos) == ([], [])
    assert claimed_days(guard) == {DAY}


async def test_a_run_missed_beyond_the_grace_time_is_skipped(tmp_path: Path) -> None:
    store = tmp_path / "scheduler.sqlite3"
    first = build(store, nothing, grace=60)
    first.start(paused=True)
    first.modify_job(
        DAILY_SUMMARY_JOB_ID, next_run_time=datetime.now(SHANGHAI) - timedelta(hours=2)
    )
    first.shutdown(wait=False)

    calls: list[str] = []

    async def job() -> None:
        calls.append("ran")

    second = build(store, job, grace=60)
    done, seen = watch(second)
    second.start()
    try:
        await asyncio.wait_for(done.wait(), deadline(EVENT))
    finally:
        second.shutdown(wait=False)
    assert [e.code for e in seen] == [EVENT_JOB_MISSED]
    assert calls == []


async def test_run_daily_summary_without_a_registered_job_does_nothing() -> None:
    register_daily_summary(None)
    assert await run_daily_summary() is None
