"""Scheduled jobs in memory, for the in-memory store: the twin of `storage.jobs.SqlJobStore`
for one process (the same contract test runs on both)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.domain.jobs import ClaimedRun, Job, JobRun, NewJob, RunStatus, next_run


class LocalJobStore:
    """Implements `bot.domain.jobs.JobStore` in dicts (one process: no other worker)."""

    shared = False

    def __init__(self) -> None:
        self._jobs: dict[int, Job] = {}
        self._runs: dict[int, JobRun] = {}
        self._try_at: dict[int, datetime] = {}
        self._claimed_at: dict[int, datetime] = {}

    async def add_job(self, job: NewJob) -> Job:
        stored = Job(
            id=len(self._jobs) + 1,
            chat_id=job.chat_id,
            thread_id=job.thread_id,
            creator_id=job.creator_id,
            creator_name=job.creator_name,
            text=job.text,
            mode=job.mode,
            repeat=job.repeat,
            zone=job.zone,
            reply_to=job.reply_to,
            status="active",
            next_at=job.first_at,
            first_at=job.first_at,
            created_at=job.created_at,
        )
        self._jobs[stored.id] = stored
        self._add_run(stored.id, job.first_at)
        return stored

    def _add_run(self, job_id: int, due: datetime) -> None:
        if any(r.job_id == job_id and r.due_at == due for r in self._runs.values()):
            return
        run = JobRun(id=len(self._runs) + 1, job_id=job_id, due_at=due, status="due")
        self._runs[run.id] = run
        self._try_at[run.id] = due

    async def get_job(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    async def list_jobs(
        self, *, chat_id: int | None = None, creator_id: int | None = None, active: bool = True
    ) -> tuple[Job, ...]:
        return tuple(
            job
            for job in sorted(self._jobs.values(), key=lambda j: -j.id)
            if (chat_id is None or job.chat_id == chat_id)
            and (creator_id is None or job.creator_id == creator_id)
            and (not active or job.status == "active")
        )

    async def cancel_job(self, job_id: int, now: datetime) -> bool:
        job = self._jobs.get(job_id)
        if job is None or job.status != "active":
            return False
        self._jobs[job_id] = replace(job, status="cancelled", next_at=None)
        for run in list(self._runs.values()):
            if run.job_id == job_id and run.status == "due":
                del self._runs[run.id]
        return True

    async def claim_due(self, now: datetime, worker: str) -> tuple[ClaimedRun, ...]:
        out: list[ClaimedRun] = []
        for run in sorted(self._runs.values(), key=lambda r: r.id):
            if run.status != "due" or self._try_at[run.id] > now:
                continue
            claimed = replace(run, status="running", attempts=run.attempts + 1)
            self._runs[run.id] = claimed
            self._claimed_at[run.id] = now
            job = self._jobs[run.job_id]
            if claimed.attempts == 1:
                job = self._advance(job, now)
            out.append(ClaimedRun(run=claimed, job=job))
        return tuple(out)

    async def next_due(self) -> datetime | None:
        waiting = [self._try_at[r.id] for r in self._runs.values() if r.status == "due"]
        return min(waiting, default=None)

    def _advance(self, job: Job, now: datetime) -> Job:
        following = next_run(job, max(now, job.next_at or now), ZoneInfo(job.zone))
        if following is None:
            changed = replace(job, status="done", next_at=None)
        else:
            self._add_run(job.id, following)
            changed = replace(job, next_at=following)
        if job.status == "active":
            self._jobs[job.id] = changed
        return changed

    async def retry_run(self, run_id: int, try_at: datetime, error: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.status == "running":
            self._runs[run_id] = replace(run, status="due", error=error)
            self._try_at[run_id] = try_at

    async def finish_run(
        self,
        run_id: int,
        status: RunStatus,
        now: datetime,
        *,
        message_id: int | None = None,
        error: str | None = None,
        late: bool = False,
    ) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            self._runs[run_id] = replace(
                run, status=status, message_id=message_id, error=error, late=late, finished_at=now
            )

    async def release_interrupted(self, claimed_before: datetime, now: datetime) -> int:
        stale = [
            run
            for run in self._runs.values()
            if run.status == "running" and self._claimed_at[run.id] < claimed_before
        ]
        for run in stale:
            await self.finish_run(
                run.id,
                "failed",
                now,
                error="interrupted: the bot stopped while sending it (not sent twice)",
            )
        return len(stale)

    async def runs(self, *, job_id: int | None = None, limit: int = 50) -> tuple[JobRun, ...]:
        chosen = [r for r in self._runs.values() if job_id is None or r.job_id == job_id]
        chosen.sort(key=lambda r: (r.due_at, r.id), reverse=True)
        return tuple(chosen[:limit])
