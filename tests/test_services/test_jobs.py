"""The job book and runner over the in-memory twin, on a stepping clock: rights and caps
(nothing stored on a refusal), cancel rights, a repeat that fires once per period (daily,
weekdays, weekly, monthly, cron) and skips what it missed, cron parsing and DST. On the
wall clock: the runner sleeps until a run is due, a job set meanwhile wakes it, and on a
store other processes write it still asks every `poll_seconds`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.clock import SystemClock
from bot.domain.jobs import NewJob, ScheduleError, next_after, parse_cron, resolve_at
from bot.domain.platform_messages import Delivery
from bot.ports import Clock, SessionInfo
from bot.services.jobs import (
    JobBook,
    JobDelivery,
    JobRefused,
    JobRequest,
    JobRunner,
    JobsPolicy,
)
from bot.services.local_jobs import LocalJobStore
from testkit.memory_store import InMemoryStore
from tests.deadlines import EVENT, deadline
from tests.fakes import RecordingMessenger, SteppingClock

SHANGHAI = ZoneInfo("Asia/Shanghai")
OWNER = 42
ALICE = 1001
BOB = 1002
GROUP = -100500
START = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)  # a Monday, 08:00 in Shanghai


def request(at: str, *, asker: int = ALICE, **changes: object) -> JobRequest:
    values: dict[str, object] = {
        "asker_id": asker,
        "asker_name": "Alice",
        "here_chat": GROUP,
        "here_thread": 0,
        "at": at,
        "text": "stand-up",
        "zone": SHANGHAI,
    }
    values.update(changes)
    return JobRequest(**values)  # type: ignore[arg-type]


def book(clock: Clock, store: LocalJobStore | None = None, **policy: float) -> JobBook:
    return JobBook(store or LocalJobStore(), JobsPolicy(owner_id=OWNER, **policy), clock)  # type: ignore[arg-type]


async def test_the_time_is_read_in_the_chat_zone_and_refusals_store_nothing() -> None:
    clock = SteppingClock(START)
    jobs = book(clock, per_member=2, per_chat=3, min_repeat_minutes=60, max_days_ahead=30)
    job = await jobs.schedule(request("2026-12-07T09:00"))
    assert job.next_at == datetime(2026, 12, 7, 1, 0, tzinfo=UTC)
    refusals = {
        "2026-12-07T07:59": "in the past",
        "2027-02-01T09:00": "30 days ahead",
        "soon": "cannot read the time",
        "2026-12-08": "names a day but no time",
    }
    for at, says in refusals.items():
        with pytest.raises(JobRefused, match=says):
            await jobs.schedule(request(at))
    with pytest.raises(JobRefused, match="invalid cron"):
        await jobs.schedule(request("2026-12-07T09:00", repeat="0 25 * * *"))
    with pytest.raises(JobRefused, match="members may repeat"):
        await jobs.schedule(request("2026-12-07T09:00", repeat="*/10 * * * *"))
    with pytest.raises(JobRefused, match="only in the chat they are in"):
        await jobs.schedule(request("2026-12-07T09:00", chat=-100777))
    await jobs.schedule(request("2026-12-07T10:00"))
    with pytest.raises(JobRefused, match="the most a member may have"):
        await jobs.schedule(request("2026-12-07T11:00"))
    # the owner: any chat, any repeat, no member cap; the chat's cap still holds
    await jobs.schedule(request("2026-12-07T09:00", asker=OWNER, repeat="*/10 * * * *"))
    with pytest.raises(JobRefused, match="its most"):
        await jobs.schedule(request("2026-12-07T09:00", asker=OWNER))
    elsewhere = await jobs.schedule(request("2026-12-07T09:00", asker=OWNER, chat=-100777))
    assert elsewhere.chat_id == -100777
    assert len(await jobs.store.list_jobs()) == 4


async def test_cancel_is_one_s_own_a_chat_admin_s_or_the_owner_s() -> None:
    clock = SteppingClock(START)
    jobs = book(clock)
    job = await jobs.schedule(request("2026-12-07T09:00"))
    admins = {BOB: False}

    async def is_admin(chat_id: int) -> bool:
        return admins[BOB]

    with pytest.raises(JobRefused, match="only they, the chat's administrators"):
        await jobs.cancel(BOB, job.name, here_chat=GROUP, is_admin=is_admin)
    with pytest.raises(JobRefused, match="in this chat"):
        await jobs.cancel(ALICE, job.name, here_chat=-100777, is_admin=is_admin)
    admins[BOB] = True
    assert (await jobs.cancel(BOB, job.name, here_chat=GROUP, is_admin=is_admin)).id == job.id
    with pytest.raises(JobRefused, match="no active job"):
        await jobs.cancel(ALICE, job.name, here_chat=GROUP, is_admin=is_admin)
    mine = await jobs.schedule(request("2026-12-07T10:00"))
    await jobs.cancel(ALICE, mine.name, here_chat=GROUP, is_admin=is_admin)
    other = await jobs.schedule(request("2026-12-07T10:00"))
    await jobs.cancel(OWNER, other.name, here_chat=OWNER, is_admin=is_admin)
    assert await jobs.store.list_jobs() == ()


class Harness:
    def __init__(
        self, clock: SteppingClock, store: LocalJobStore | None = None, poll_seconds: float = 5
    ) -> None:
        self.clock = clock
        self.messenger = ArrivalMessenger()
        self.store = InMemoryStore(clock=clock)
        self.book = book(clock, store, min_repeat_minutes=60, poll_seconds=poll_seconds)

        @asynccontextmanager
        async def no_lock(session: SessionInfo) -> AsyncIterator[None]:
            yield

        self.runner = JobRunner(
            self.book.store,
            self.book.policy,
            clock,
            JobDelivery(
                messenger=self.messenger,
                notices=self.messenger,
                sessions=self.store,
                history=self.store,
                turn_lock=no_lock,
                bot_id=7,
                bot_name="bot",
                locale_for_chat=lambda chat: "en",
            ),
        )

    async def run_for(self, days: int, step_minutes: int = 30) -> list[datetime]:
        """Step the clock through `days`, ticking every `step_minutes`; the local times
        each post was sent at."""
        sent: list[datetime] = []
        for _ in range(days * 24 * 60 // step_minutes):
            self.clock.advance(step_minutes * 60)
            before = len(self.messenger.sent)
            await self.runner.tick()
            sent.extend(
                [self.clock.now().astimezone(SHANGHAI)] * (len(self.messenger.sent) - before)
            )
        return sent


@pytest.mark.parametrize(
    ("repeat", "days", "expected"),
    [
        ("daily", 7, 7),
        ("weekdays", 7, 5),
        ("weekly", 15, 3),
        ("monthly", 62, 2),
        ("30 9 * * 1,3", 7, 2),
    ],
)
async def test_a_repeat_fires_once_per_period(repeat: str, days: int, expected: int) -> None:
    harness = Harness(SteppingClock(START))
    await harness.book.schedule(request("2026-12-07T09:00", repeat=repeat))
    sent = await harness.run_for(days)
    assert len(sent) == expected
    assert len({t.date() for t in sent}) == expected  # never twice in one period
    assert all(t.hour in (9, 10) for t in sent)


async def test_a_repeat_that_missed_several_periods_runs_once() -> None:
    harness = Harness(SteppingClock(START))
    await harness.book.schedule(request("2026-12-07T09:00", repeat="daily"))
    harness.clock.advance(3 * 24 * 3600 + 3600 + 1800)  # down three days; back 30 min after
    await harness.runner.tick()
    (sent,) = harness.messenger.texts(GROUP)
    assert sent.endswith("stand-up")
    assert sent.startswith("(Late")
    await harness.runner.tick()
    assert len(harness.messenger.texts(GROUP)) == 1


def test_cron_fields_and_a_dst_gap() -> None:
    with pytest.raises(ScheduleError, match="5 fields"):
        parse_cron("0 9 * *")
    with pytest.raises(ScheduleError, match="minute"):
        parse_cron("60 9 * * *")
    cron = parse_cron("0 2 * * *")
    berlin = ZoneInfo("Europe/Berlin")
    # 2027-03-28 02:00 does not exist in Berlin: the run moves past the gap, once
    after = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
    first = next_after(cron, after, berlin)
    assert first is not None
    second = next_after(cron, first, berlin)
    assert second is not None
    assert first.astimezone(berlin).hour == 3
    assert second.astimezone(berlin).hour == 2
    assert resolve_at("2026-12-07T09:00+00:00", SHANGHAI) == datetime(2026, 12, 7, 9, tzinfo=UTC)


async def test_a_task_is_set_like_a_post_and_an_unknown_mode_is_refused() -> None:
    clock = SteppingClock(START)
    jobs = book(clock)
    job = await jobs.schedule(request("2026-12-07T09:00", mode="task"))
    assert (job.mode, job.name) == ("task", "j1")
    with pytest.raises(JobRefused, match="use 'post' or 'task'"):
        await jobs.schedule(request("2026-12-07T09:00", mode="poem"))
    with pytest.raises(JobRefused, match="in the past"):  # the same checks as a post's
        await jobs.schedule(request("2026-12-07T07:00", mode="task"))
    assert len(await jobs.store.list_jobs()) == 1


@dataclass(slots=True)
class ArrivalMessenger(RecordingMessenger):
    """Records like `RecordingMessenger`, and when each text went out (wall clock)."""

    sent_at: list[datetime] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def send_text(self, chat_id: int, text: str, **kwargs: object) -> Delivery:
        delivery = await RecordingMessenger.send_text(self, chat_id, text, **kwargs)  # type: ignore[arg-type]
        self.sent_at.append(datetime.now(UTC))
        self.arrived.set()
        return delivery


class WatchedJobs(LocalJobStore):
    """The in-memory jobs, telling when the runner has looked for its next due run; `shared`
    plays a database other workers add runs to."""

    def __init__(self, *, shared: bool) -> None:
        super().__init__()
        self.shared = shared
        self.looked = asyncio.Event()

    async def next_due(self) -> datetime | None:
        due = await LocalJobStore.next_due(self)
        self.looked.set()
        return due


@asynccontextmanager
async def running(harness: Harness) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(harness.runner.run(stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def test_a_job_set_while_the_runner_sleeps_wakes_it_and_is_sent_at_its_time() -> None:
    store = WatchedJobs(shared=False)
    harness = Harness(SystemClock(), store, poll_seconds=3600)  # a poll would never find it
    harness.book.on_scheduled = harness.runner.nudge
    async with running(harness):
        await asyncio.wait_for(store.looked.wait(), deadline(EVENT))  # found nothing: asleep
        due = datetime.now(SHANGHAI) + timedelta(seconds=2)
        job = await harness.book.schedule(
            request(due.replace(tzinfo=None).isoformat(timespec="seconds"))
        )
        await asyncio.wait_for(harness.messenger.arrived.wait(), deadline(EVENT))
    assert job.next_at is not None
    (sent_at,) = harness.messenger.sent_at
    assert sent_at >= job.next_at  # at its time, not before
    assert harness.messenger.texts(GROUP) == ["stand-up"]


async def test_on_a_store_other_workers_write_the_runner_still_asks_every_poll() -> None:
    store = WatchedJobs(shared=True)
    harness = Harness(SystemClock(), store, poll_seconds=0.05)
    async with running(harness):
        await asyncio.wait_for(store.looked.wait(), deadline(EVENT))
        now = datetime.now(UTC)
        await store.add_job(  # another worker's job: nobody nudges this runner
            NewJob(
                chat_id=GROUP,
                creator_id=ALICE,
                creator_name="Alice",
                text="from elsewhere",
                zone="Asia/Shanghai",
                first_at=now + timedelta(seconds=0.3),
                created_at=now,
            )
        )
        await asyncio.wait_for(harness.messenger.arrived.wait(), deadline(EVENT))
    assert harness.messenger.texts(GROUP) == ["from elsewhere"]
