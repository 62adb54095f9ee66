"""Scheduled jobs as data: a job, its runs, when it is due next (repeats and 5-field cron).

Pure: the time a job names is resolved in a given zone, repeats are computed as local
wall-clock times (a daily job at 09:00 stays at 09:00 across a DST change), and every
instant handed out is UTC. See docs/architecture.md, Scheduled jobs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Literal, Protocol

JobMode = Literal["post", "task"]
JobStatus = Literal["active", "done", "cancelled"]
RunStatus = Literal["due", "running", "delivered", "failed", "missed"]

REPEAT_WORDS = ("daily", "weekdays", "weekly", "monthly")

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12), ("weekday", 0, 7))


class ScheduleError(ValueError):
    """The time or the repeat a job names cannot be used (the message says why)."""


def job_name(job_id: int) -> str:
    return f"j{job_id}"


def parse_job_name(value: str) -> int | None:
    """`"j3"` (or `"3"`) → 3; None for anything else."""
    text = value.strip().lower().removeprefix("j")
    return int(text) if text.isdigit() else None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    chat_id: int
    thread_id: int = 0
    creator_id: int
    creator_name: str = ""
    text: str
    mode: JobMode = "post"
    repeat: str | None = None
    zone: str = "UTC"
    reply_to: int | None = None
    first_at: datetime
    """When it first runs (UTC)."""
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    id: int
    chat_id: int
    thread_id: int
    creator_id: int
    creator_name: str
    text: str
    mode: JobMode
    repeat: str | None
    zone: str
    reply_to: int | None
    status: JobStatus
    next_at: datetime | None
    """The due time of its pending run (UTC); None when nothing is pending."""
    first_at: datetime
    """Its first due time (UTC): a repeat word keeps that local minute, weekday, day."""
    created_at: datetime

    @property
    def name(self) -> str:
        return job_name(self.id)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    id: int
    job_id: int
    due_at: datetime
    status: RunStatus
    attempts: int = 0
    message_id: int | None = None
    error: str | None = None
    late: bool = False
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedRun:
    """A run this worker claimed (it alone delivers it), with its job."""

    run: JobRun
    job: Job


# ---------------------------------------------------------------- the time a job names


def resolve_at(value: str, zone: tzinfo) -> datetime:
    """An ISO-8601 date-time (`2026-12-08T09:00`, `2026-12-08 09:00:30+08:00`) as UTC; one
    without an offset is read in `zone`. Raises `ScheduleError` on anything else."""
    text = value.strip()
    if not text:
        raise ScheduleError("'at' is empty; give an ISO-8601 date-time such as 2026-12-08T09:00")
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleError(
            f"cannot read the time {value!r}; give an ISO-8601 date-time such as "
            "2026-12-08T09:00 (the chat's time zone) or 2026-12-08T09:00+08:00"
        ) from None
    if len(text) <= 10:  # a bare date names no time of day
        raise ScheduleError(f"{value!r} names a day but no time; add one, e.g. {text}T09:00")
    if parsed.tzinfo is None:
        parsed = _local(parsed, zone)
    return parsed.astimezone(UTC)


def _local(naive: datetime, zone: tzinfo) -> datetime:
    """A wall-clock time in `zone`; one that a DST change skips moves forward past the gap."""
    aware = naive.replace(tzinfo=zone)
    # in a gap the round trip lands past it (02:30 → 03:30); elsewhere it is the same time
    return aware.astimezone(UTC).astimezone(zone)


# ---------------------------------------------------------------- repeats


@dataclass(frozen=True, slots=True)
class Cron:
    """A 5-field cron expression: minute hour day-of-month month day-of-week (0 or 7 is
    Sunday). As in cron, when both day fields are restricted either one matching suffices."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_any: bool
    weekdays_any: bool

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_any:
            return in_weekdays
        if self.weekdays_any:
            return in_days
        return in_days or in_weekdays


def parse_cron(expression: str) -> Cron:
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"invalid cron expression {expression!r}: it needs 5 fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 10 * * 1-5'"
        )
    values = [
        _cron_field(text, name, low, high)
        for text, (name, low, high) in zip(fields, _FIELDS, strict=True)
    ]
    weekdays = frozenset(v % 7 for v in values[4])
    return Cron(
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=weekdays,
        days_any=fields[2] in ("*", "?"),
        weekdays_any=fields[4] in ("*", "?"),
    )


def _cron_field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    found: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        if (step_text and not step_text.isdigit()) or step_text == "0":
            raise ScheduleError(f"invalid cron {name} field {text!r}: bad step {step_text!r}")
        step = int(step_text) if step_text else 1
        if body in ("*", "?"):
            start, end = low, high
        else:
            first, dash, last = body.partition("-")
            if not first.isdigit() or (dash and not last.isdigit()):
                raise ScheduleError(f"invalid cron {name} field {text!r}")
            start = int(first)
            end = int(last) if dash else (high if step_text else start)
        if not (low <= start <= high and low <= end <= high and start <= end):
            raise ScheduleError(f"invalid cron {name} field {text!r}: outside {low}-{high}")
        found.update(range(start, end + 1, step))
    return frozenset(found)


def repeat_cron(repeat: str, first_local: datetime) -> Cron:
    """The cron a repeat word (or expression) stands for, the word ones anchored at the
    first run's local minute, hour, weekday and day of month."""
    word = repeat.strip().lower()
    minute, hour = first_local.minute, first_local.hour
    match word:
        case "daily":
            return parse_cron(f"{minute} {hour} * * *")
        case "weekdays":
            return parse_cron(f"{minute} {hour} * * 1-5")
        case "weekly":
            return parse_cron(f"{minute} {hour} * * {first_local.isoweekday() % 7}")
        case "monthly":
            return parse_cron(f"{minute} {hour} {first_local.day} * *")
    if len(word.split()) != 5:
        raise ScheduleError(
            f"unknown repeat {repeat!r}: use daily, weekdays, weekly, monthly or a 5-field "
            "cron expression such as '0 10 * * 1-5'"
        )
    return parse_cron(word)


MAX_SEARCH_DAYS = 5 * 366 + 1


def next_after(cron: Cron, after: datetime, zone: tzinfo) -> datetime | None:
    """The first local minute matching `cron` strictly after `after`, as UTC (None when
    none comes within five years, e.g. `0 0 31 2 *`)."""
    local = after.astimezone(zone)
    day = local.date()
    for _ in range(MAX_SEARCH_DAYS):
        if cron.matches_day(day):
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    candidate = _local(datetime(day.year, day.month, day.day, hour, minute), zone)
                    if candidate.astimezone(UTC) > after:
                        return candidate.astimezone(UTC)
        day += timedelta(days=1)
    return None


def first_run(at: datetime, repeat: str | None, zone: tzinfo) -> tuple[datetime, Cron | None]:
    """When a job first runs: `at` itself for a one-shot or a repeat word; for a cron
    expression the first matching minute at or after `at`."""
    if repeat is None:
        return at, None
    cron = repeat_cron(repeat, at.astimezone(zone))
    if repeat.strip().lower() in REPEAT_WORDS:
        return at, cron
    first = next_after(cron, at - timedelta(seconds=1), zone)
    if first is None:
        raise ScheduleError(f"the cron expression {repeat!r} never comes due")
    return first, cron


def next_run(job: Job, after: datetime, zone: tzinfo) -> datetime | None:
    """A repeating job's next due time strictly after `after` (several missed periods run
    once: the next one is counted from now, not from the missed ones)."""
    if job.repeat is None:
        return None
    return next_after(repeat_cron(job.repeat, job.first_at.astimezone(zone)), after, zone)


def shortest_gap(cron: Cron, start: datetime, zone: tzinfo, samples: int = 48) -> timedelta:
    """The shortest time between two of the next `samples` runs (how often it repeats)."""
    times: list[datetime] = []
    at = start
    for _ in range(samples):
        found = next_after(cron, at, zone)
        if found is None:
            break
        times.append(found)
        at = found
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return min(gaps) if gaps else timedelta(days=366)


# ---------------------------------------------------------------- the store's port


class JobStore(Protocol):
    """Jobs and their runs (`storage.jobs.SqlJobStore`, `bot.services.local_jobs`)."""

    shared: bool
    """Whether other processes may add runs (a database several workers use): the runner
    then asks every `poll_seconds`; else it sleeps until the next run is due."""

    async def add_job(self, job: NewJob) -> Job:
        """Store the job and its first run, due at `job.first_at`."""
        ...

    async def get_job(self, job_id: int) -> Job | None: ...

    async def list_jobs(
        self, *, chat_id: int | None = None, creator_id: int | None = None, active: bool = True
    ) -> tuple[Job, ...]:
        """Jobs, newest first, of one chat and/or one creator (None: any)."""
        ...

    async def cancel_job(self, job_id: int, now: datetime) -> bool:
        """Cancel an active job and drop its pending run; False when it was not active."""
        ...

    async def claim_due(self, now: datetime, worker: str) -> tuple[ClaimedRun, ...]:
        """Claim every run due by `now` (one statement: a run is claimed by one worker,
        once); a repeating job's next run is added in the same transaction, counted from
        `now` (missed periods run once), and a one-shot job is done."""
        ...

    async def next_due(self) -> datetime | None:
        """When the earliest run waiting to be claimed is due (None: no run waits)."""
        ...

    async def retry_run(self, run_id: int, try_at: datetime, error: str) -> None:
        """Put a claimed run back, due again at `try_at` (a 429 or a 5xx)."""
        ...

    async def finish_run(
        self,
        run_id: int,
        status: RunStatus,
        now: datetime,
        *,
        message_id: int | None = None,
        error: str | None = None,
        late: bool = False,
    ) -> None: ...

    async def release_interrupted(self, claimed_before: datetime, now: datetime) -> int:
        """Runs claimed before `claimed_before` and never finished (their worker died
        mid-send) become failed: not sent again, since they may have been sent once."""
        ...

    async def runs(self, *, job_id: int | None = None, limit: int = 50) -> tuple[JobRun, ...]:
        """Runs, newest due first (one job's, or every job's)."""
        ...


def latest_due(job: Job, due: datetime, now: datetime, zone: tzinfo) -> datetime:
    """The last time a repeating job came due at or before `now`, from its pending `due`
    (the period a restart still runs, once, when it missed several)."""
    latest = due
    for _ in range(10_000):
        following = next_run(job, latest, zone)
        if following is None or following > now:
            break
        latest = following
    return latest
