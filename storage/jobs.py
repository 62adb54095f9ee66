"""Scheduled jobs and their runs in the database (implements `bot.domain.jobs.JobStore`).

`jobs` holds what a member asked for; `job_runs` one row per run: due, running (claimed by
one worker), delivered (with Telegram's `message_id`), failed (with Telegram's words) or
missed. Times are UTC epoch seconds (floats), comparable the same way on both backends.

Exactly once: a due run is claimed by the one statement `_CLAIM` (`UPDATE … SET status =
'running' WHERE status = 'due' AND try_at <= :now RETURNING …`). On PostgreSQL a second
worker's UPDATE waits for the first one's row lock, then re-reads the row, finds it no
longer due and skips it; on SQLite the write transaction is `BEGIN IMMEDIATE`. A repeating
job's next run is inserted in the claim's transaction (unique per job and due time), so a
crash after the claim loses no future run. See docs/architecture.md, Scheduled jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlmodel import SQLModel

from bot.domain.jobs import (
    ClaimedRun,
    Job,
    JobMode,
    JobRun,
    JobStatus,
    NewJob,
    RunStatus,
    next_run,
)
from storage.engine import WRITE, is_shared
from storage.executor import Database
from storage.tables import ID_TYPE

jobs_table = sa.Table(
    "jobs",
    SQLModel.metadata,
    sa.Column("id", ID_TYPE, primary_key=True),
    sa.Column("chat_id", sa.BigInteger(), nullable=False),
    sa.Column("thread_id", sa.BigInteger(), nullable=False),
    sa.Column("creator_id", sa.BigInteger(), nullable=False),
    sa.Column("creator_name", sa.Text(), nullable=False),
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("mode", sa.String(8), nullable=False),
    sa.Column("repeat", sa.Text(), nullable=True),
    sa.Column("zone", sa.Text(), nullable=False),
    sa.Column("reply_to", sa.BigInteger(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("next_at", sa.Float(), nullable=True),
    sa.Column("first_at", sa.Float(), nullable=False),
    sa.Column("created_at", sa.Float(), nullable=False),
    sa.Index("ix_jobs_chat", "chat_id", "status"),
    sa.Index("ix_jobs_creator", "creator_id", "status"),
)

job_runs_table = sa.Table(
    "job_runs",
    SQLModel.metadata,
    sa.Column("id", ID_TYPE, primary_key=True),
    sa.Column("job_id", sa.BigInteger(), sa.ForeignKey("jobs.id"), nullable=False),
    sa.Column("due_at", sa.Float(), nullable=False),
    sa.Column("try_at", sa.Float(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("worker", sa.Text(), nullable=True),
    sa.Column("claimed_at", sa.Float(), nullable=True),
    sa.Column("message_id", sa.BigInteger(), nullable=True),
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("late", sa.Boolean(), nullable=False),
    sa.Column("finished_at", sa.Float(), nullable=True),
    sa.UniqueConstraint("job_id", "due_at", name="uq_job_runs_due"),
    sa.Index("ix_job_runs_due", "status", "try_at"),
)

_CLAIM = sa.text(
    "UPDATE job_runs SET status = 'running', attempts = attempts + 1, worker = :worker, "
    "claimed_at = :now WHERE status = 'due' AND try_at <= :now "
    "RETURNING id, job_id, due_at, attempts"
)


_NEXT_DUE = sa.text("SELECT min(try_at) FROM job_runs WHERE status = 'due'")


def _ts(value: datetime) -> float:
    return value.timestamp()


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _job(row: Any) -> Job:
    return Job(
        id=int(row.id),
        chat_id=int(row.chat_id),
        thread_id=int(row.thread_id),
        creator_id=int(row.creator_id),
        creator_name=row.creator_name,
        text=row.text,
        mode=cast(JobMode, row.mode),
        repeat=row.repeat,
        zone=row.zone,
        reply_to=None if row.reply_to is None else int(row.reply_to),
        status=cast(JobStatus, row.status),
        next_at=_dt(row.next_at),
        first_at=datetime.fromtimestamp(row.first_at, UTC),
        created_at=datetime.fromtimestamp(row.created_at, UTC),
    )


def _run(row: Any) -> JobRun:
    return JobRun(
        id=int(row.id),
        job_id=int(row.job_id),
        due_at=datetime.fromtimestamp(row.due_at, UTC),
        status=cast(RunStatus, row.status),
        attempts=int(row.attempts),
        message_id=None if row.message_id is None else int(row.message_id),
        error=row.error,
        late=bool(row.late),
        finished_at=_dt(row.finished_at),
    )


class SqlJobStore:
    """Implements `bot.domain.jobs.JobStore` on SQLite and PostgreSQL (module docstring)."""

    def __init__(self, engine: AsyncEngine, *, database: Database | None = None) -> None:
        self._engine = engine
        self.shared = is_shared(engine.url)
        self._poll = database
        """The bot's own store's `Database` (`tgbot run`): the runner's frequent "when is the
        next run due?" read runs as one job on it, without SQLAlchemy's per-statement path."""

    async def add_job(self, job: NewJob) -> Job:
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(**WRITE)
            async with conn.begin():
                result = await conn.execute(
                    jobs_table.insert()
                    .values(
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
                        next_at=_ts(job.first_at),
                        first_at=_ts(job.first_at),
                        created_at=_ts(job.created_at),
                    )
                    .returning(jobs_table)
                )
                row = result.one()
                await _add_run(conn, int(row.id), job.first_at)
        return _job(row)

    async def get_job(self, job_id: int) -> Job | None:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(jobs_table.select().where(jobs_table.c.id == job_id))
            ).one_or_none()
        return None if row is None else _job(row)

    async def list_jobs(
        self, *, chat_id: int | None = None, creator_id: int | None = None, active: bool = True
    ) -> tuple[Job, ...]:
        query = jobs_table.select().order_by(jobs_table.c.id.desc())
        if chat_id is not None:
            query = query.where(jobs_table.c.chat_id == chat_id)
        if creator_id is not None:
            query = query.where(jobs_table.c.creator_id == creator_id)
        if active:
            query = query.where(jobs_table.c.status == "active")
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return tuple(_job(row) for row in rows)

    async def cancel_job(self, job_id: int, now: datetime) -> bool:
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(**WRITE)
            async with conn.begin():
                result = await conn.execute(
                    jobs_table.update()
                    .where(jobs_table.c.id == job_id, jobs_table.c.status == "active")
                    .values(status="cancelled", next_at=None)
                    .returning(jobs_table.c.id)
                )
                if result.one_or_none() is None:
                    return False
                await conn.execute(
                    job_runs_table.delete().where(
                        job_runs_table.c.job_id == job_id, job_runs_table.c.status == "due"
                    )
                )
        return True

    async def claim_due(self, now: datetime, worker: str) -> tuple[ClaimedRun, ...]:
        stamp = _ts(now)
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(**WRITE)
            async with conn.begin():
                claimed = (await conn.execute(_CLAIM, {"worker": worker, "now": stamp})).all()
                if not claimed:
                    return ()
                job_ids = sorted({int(row.job_id) for row in claimed})
                jobs = {
                    job.id: job
                    for job in map(
                        _job,
                        (
                            await conn.execute(
                                jobs_table.select().where(jobs_table.c.id.in_(job_ids))
                            )
                        ).all(),
                    )
                }
                out: list[ClaimedRun] = []
                for row in claimed:
                    job = jobs[int(row.job_id)]
                    if int(row.attempts) == 1:  # its first claim: what comes next is set
                        job = await _advance(conn, job, now)
                    run = JobRun(
                        id=int(row.id),
                        job_id=job.id,
                        due_at=datetime.fromtimestamp(row.due_at, UTC),
                        status="running",
                        attempts=int(row.attempts),
                    )
                    out.append(ClaimedRun(run=run, job=job))
        return tuple(out)

    async def next_due(self) -> datetime | None:
        if self._poll is not None:
            (row,) = await self._poll.one_read(_NEXT_DUE, {})
        else:
            async with self._engine.connect() as conn:
                row = (await conn.execute(_NEXT_DUE)).one()
        return _dt(row[0])

    async def retry_run(self, run_id: int, try_at: datetime, error: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                job_runs_table.update()
                .where(job_runs_table.c.id == run_id, job_runs_table.c.status == "running")
                .values(status="due", try_at=_ts(try_at), error=error)
            )

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
        async with self._engine.begin() as conn:
            await conn.execute(
                job_runs_table.update()
                .where(job_runs_table.c.id == run_id)
                .values(
                    status=status,
                    message_id=message_id,
                    error=error,
                    late=late,
                    finished_at=_ts(now),
                )
            )

    async def release_interrupted(self, claimed_before: datetime, now: datetime) -> int:
        async with self._engine.begin() as conn:
            result = await conn.execute(
                job_runs_table.update()
                .where(
                    job_runs_table.c.status == "running",
                    job_runs_table.c.claimed_at < _ts(claimed_before),
                )
                .values(
                    status="failed",
                    error="interrupted: the bot stopped while sending it (not sent twice)",
                    finished_at=_ts(now),
                )
            )
        return int(result.rowcount or 0)

    async def runs(self, *, job_id: int | None = None, limit: int = 50) -> tuple[JobRun, ...]:
        query = job_runs_table.select().order_by(
            job_runs_table.c.due_at.desc(), job_runs_table.c.id.desc()
        )
        if job_id is not None:
            query = query.where(job_runs_table.c.job_id == job_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.limit(limit))).all()
        return tuple(_run(row) for row in rows)


async def _add_run(conn: AsyncConnection, job_id: int, due: datetime) -> None:
    await conn.execute(
        job_runs_table.insert().values(
            job_id=job_id,
            due_at=_ts(due),
            try_at=_ts(due),
            status="due",
            attempts=0,
            late=False,
        )
    )


async def _advance(conn: AsyncConnection, job: Job, now: datetime) -> Job:
    """After a job's run is first claimed: the next run of a repeat (counted from `now`),
    or the end of a one-shot job."""
    following = next_run(job, max(now, job.next_at or now), ZoneInfo(job.zone))
    if following is None:
        values: dict[str, object] = {"status": "done", "next_at": None}
    else:
        exists = (
            await conn.execute(
                sa.select(job_runs_table.c.id).where(
                    job_runs_table.c.job_id == job.id, job_runs_table.c.due_at == _ts(following)
                )
            )
        ).one_or_none()
        if exists is None:
            await _add_run(conn, job.id, following)
        values = {"next_at": _ts(following)}
    await conn.execute(
        jobs_table.update()
        .where(jobs_table.c.id == job.id, jobs_table.c.status == "active")
        .values(**values)
    )
    if following is None:
        return _replace(job, status="done", next_at=None)
    return _replace(job, next_at=following)


def _replace(job: Job, **changes: Any) -> Job:
    return replace(job, **changes)


def job_tables() -> Sequence[sa.Table]:
    """The tables this module owns (the migration `0011_jobs` creates them)."""
    return (jobs_table, job_runs_table)


async def job_counts(engine: AsyncEngine) -> tuple[dict[str, int], dict[str, int]]:
    """(jobs by status, runs by status): what `/metrics` reports."""
    async with engine.connect() as conn:
        jobs = (
            await conn.execute(
                sa.select(jobs_table.c.status, sa.func.count()).group_by(jobs_table.c.status)
            )
        ).all()
        runs = (
            await conn.execute(
                sa.select(job_runs_table.c.status, sa.func.count()).group_by(
                    job_runs_table.c.status
                )
            )
        ).all()
    return {str(s): int(n) for s, n in jobs}, {str(s): int(n) for s, n in runs}
