"""apscheduler 3 wiring: the daily-summary cron job in a persistent SQLAlchemy job store.

The job store lives in its OWN database (a sync SQLAlchemy URL such as
`sqlite:///DATA_DIR/scheduler.sqlite3`), never in the bot's database file, so a busy bot
database cannot lock the scheduler. With PostgreSQL and several workers each worker may keep
a local SQLite job store: every worker fires, and the once-a-day claim
(`Claims.claim_daily_summary`, in the shared database) lets exactly one of them send.

A persistent store pickles the job, so the job's callable must be importable by name. The
store therefore holds the textual reference `adapters.scheduler:run_daily_summary`, and that
module-level function calls whatever `build_scheduler` registered in this process (e.g. a
bound `DailySummary.send_yesterday`). At start-up an existing job with the same trigger
keeps its stored `next_run_time`, so a run missed while the bot was down still fires within
the misfire grace time (once, coalesced); a changed trigger replaces the job.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import tzinfo
from pathlib import Path
from typing import Any

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy.engine import make_url

logger = logging.getLogger(__name__)

DAILY_SUMMARY_JOB_ID = "daily-summary"
DAILY_SUMMARY_REF = "adapters.scheduler:run_daily_summary"
JOBSTORE_ALIAS = "default"

DailyJob = Callable[[], Awaitable[object]]

_registry: dict[str, DailyJob] = {}


def register_daily_summary(job: DailyJob | None) -> None:
    """Set (or clear, with `None`) what `run_daily_summary` runs in this process."""
    if job is None:
        _registry.pop(DAILY_SUMMARY_JOB_ID, None)
    else:
        _registry[DAILY_SUMMARY_JOB_ID] = job


async def run_daily_summary() -> object:
    """The scheduled callable (stored by reference): runs the registered daily job."""
    job = _registry.get(DAILY_SUMMARY_JOB_ID)
    if job is None:
        logger.warning("daily summary fired but no job is registered in this process")
        return None
    return await job()


def parse_daily_time(value: str) -> tuple[int, int]:
    """`"HH:MM"` → `(hour, minute)`; raises `ValueError` on anything else."""
    hours, sep, minutes = value.partition(":")
    if not (sep and hours.isdigit() and minutes.isdigit()):
        raise ValueError(f"expected HH:MM, got {value!r}")
    hour, minute = int(hours), int(minutes)
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise ValueError(f"expected HH:MM, got {value!r}")
    return hour, minute


def daily_trigger(daily_time: str, zone: tzinfo) -> CronTrigger:
    hour, minute = parse_daily_time(daily_time)
    return CronTrigger(hour=hour, minute=minute, timezone=zone)


def build_scheduler(
    *,
    jobstore_url: str,
    zone: tzinfo,
    daily_time: str,
    misfire_grace_seconds: int,
    job: DailyJob,
) -> AsyncIOScheduler:
    """An AsyncIOScheduler (not started) with the daily-summary job in a persistent store.

    `job` is registered for `run_daily_summary`; the store keeps only the reference. Start it
    inside the running event loop (`scheduler.start()`), stop it with `shutdown()`.
    """
    trigger = daily_trigger(daily_time, zone)
    register_daily_summary(job)
    _ensure_sqlite_dir(jobstore_url)
    store = SQLAlchemyJobStore(url=jobstore_url)
    scheduler = AsyncIOScheduler(timezone=zone)
    scheduler.add_jobstore(store, JOBSTORE_ALIAS)
    options: dict[str, Any] = {}
    kept = _stored_next_run_time(store, trigger)
    if kept is not None:
        options["next_run_time"] = kept
    scheduler.add_job(
        DAILY_SUMMARY_REF,
        trigger=trigger,
        id=DAILY_SUMMARY_JOB_ID,
        name="daily usage summary",
        jobstore=JOBSTORE_ALIAS,
        replace_existing=True,
        coalesce=True,
        misfire_grace_time=misfire_grace_seconds,
        max_instances=1,
        **options,
    )
    return scheduler


def _ensure_sqlite_dir(url: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)


def _stored_next_run_time(store: SQLAlchemyJobStore, trigger: CronTrigger) -> Any:
    """The stored job's next run time when its trigger is unchanged, else `None`."""
    store.jobs_t.create(store.engine, checkfirst=True)
    try:
        existing = store.lookup_job(DAILY_SUMMARY_JOB_ID)
    except Exception:  # an unreadable stored job is simply replaced
        logger.warning("stored daily-summary job could not be read; replacing it", exc_info=True)
        return None
    if existing is None or repr(existing.trigger) != repr(trigger):
        return None
    return existing.next_run_time
