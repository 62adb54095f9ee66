"""The dashboard's `/jobs` page (every scheduled job: who set it, its next run, its past runs
with Telegram's message ids or its words) and the jobs' lines of `/metrics`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.app.dashboard.board import dashboard_of, render
from bot.domain.jobs import Job, JobRun
from storage.jobs import SqlJobStore, job_counts

log = logging.getLogger("tgbot.dashboard")

MAX_JOBS = 200
MAX_RUNS = 500
JOB_STATUSES = ("active", "done", "cancelled")
RUN_STATUSES = ("due", "running", "delivered", "failed", "missed")


@dataclass(frozen=True, slots=True)
class JobLine:
    job: Job
    next_local: str
    runs: tuple[JobRun, ...]


def _local(when: datetime | None, zone: str) -> str:
    if when is None:
        return "-"
    return f"{when.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} ({zone})"


async def jobs_page(request: web.Request) -> web.Response:
    dashboard = dashboard_of(request)
    store = SqlJobStore(dashboard.engine)
    jobs = (await store.list_jobs(active=False))[:MAX_JOBS]
    runs = await store.runs(limit=MAX_RUNS)
    by_job: dict[int, list[JobRun]] = {}
    for run in runs:
        by_job.setdefault(run.job_id, []).append(run)
    lines = [
        JobLine(
            job=job, next_local=_local(job.next_at, job.zone), runs=tuple(by_job.get(job.id, ()))
        )
        for job in jobs
    ]
    return render(request, "jobs.html", title="Jobs", jobs=lines)


async def jobs_metrics(request: web.Request) -> str:
    """`tgbot_jobs{status}` and `tgbot_job_runs{status}` in the Prometheus text format
    (nothing when the database cannot say: the other metrics are still served)."""
    try:
        jobs, runs = await job_counts(dashboard_of(request).engine)
    except Exception:
        log.warning("jobs metrics: the database could not be read", exc_info=True)
        return ""
    lines = [
        "# HELP tgbot_jobs Scheduled jobs by status",
        "# TYPE tgbot_jobs gauge",
        *(f'tgbot_jobs{{status="{s}"}} {jobs.get(s, 0)}' for s in JOB_STATUSES),
        "# HELP tgbot_job_runs Runs of scheduled jobs by status",
        "# TYPE tgbot_job_runs gauge",
        *(f'tgbot_job_runs{{status="{s}"}} {runs.get(s, 0)}' for s in RUN_STATUSES),
    ]
    return "\n".join(lines) + "\n"
