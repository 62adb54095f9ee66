"""Reminders and scheduled posts: who may set, see and cancel a job (`JobBook`), and the
loop that claims due runs and delivers them honestly (`JobRunner`).

A run is delivered only when Telegram returned a `message_id`, which is recorded with the
run; a 429 or a 5xx puts the run back for a later try; a 403 or a 400 (bot removed, chat
gone, topic closed) is recorded failed with Telegram's words and the creator is told in
their private chat. A post waits for a turn running in its chat (the chat's turn lock),
goes through the outbound chain (send pacing) and is stored as the bot's message. A run
the bot missed while down is sent late within `misfire_grace_seconds` (saying so), else
recorded missed and its creator told. A `task` run is a turn of the chat's session with
the job's text as its per-turn instruction (`bot.context.task_block`; never stored),
charged to its creator and ledgered `purpose: job`; it is delivered when its answer's send
returned a `message_id`. See docs/architecture.md, Scheduled jobs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from bot.agent.events import TurnOutcome
from bot.context.projection import record_tokens
from bot.context.task_block import TaskInstruction
from bot.domain.ids import Locale, Scene, SessionKey
from bot.domain.jobs import (
    REPEAT_WORDS,
    ClaimedRun,
    Job,
    JobMode,
    JobStore,
    NewJob,
    ScheduleError,
    first_run,
    latest_due,
    parse_job_name,
    resolve_at,
    shortest_gap,
)
from bot.domain.platform_messages import Delivery
from bot.domain.records import AssistantRecord
from bot.errors import TelegramError, TelegramFloodWait, TelegramNetworkError
from bot.ports import Clock, Messenger, NewRecord, SessionInfo
from bot.store_ports import HistoryStore, SessionStore
from bot.texts import text

log = logging.getLogger(__name__)

MAX_JOB_TEXT = 4000
MAX_ATTEMPTS = 6
"""Tries of one run through 429s and 5xx before it is recorded failed."""
RETRY_SECONDS = 5.0
"""The first wait after a 5xx (doubled each try); a 429 waits Telegram's `retry_after`."""
INTERRUPTED_AFTER = timedelta(minutes=10)
"""A run claimed this long ago and never finished: its worker died mid-send."""
QUIET_POLL_SECONDS = 60.0
"""The longest the runner sleeps on a store only its process writes: the next due run or a
job added here wakes it sooner; the bound only limits what a wall-clock jump can delay."""
SHORTEST_SLEEP = 0.1
"""Between looks when a run is already due (a claim that failed): never a busy loop."""


class JobRefused(Exception):
    """What a job request cannot do, in words for the model (and the `/jobs` asker)."""

    def __init__(self, message: str, *, key: str = "jobs_not_found") -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True, kw_only=True)
class JobsPolicy:
    """`[jobs]`, and whose rights are unlimited (the owner)."""

    owner_id: int | None
    per_member: int = 10
    per_chat: int = 50
    min_repeat_minutes: int = 60
    max_days_ahead: int = 366
    misfire_grace_seconds: float = 3600
    late_after_seconds: float = 60
    poll_seconds: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """What the `schedule` tool was asked, and by whom, from where."""

    asker_id: int
    asker_name: str
    here_chat: int
    here_thread: int
    at: str
    text: str
    repeat: str | None = None
    mode: JobMode = "post"
    reply_to: int | None = None
    chat: int | None = None
    zone: tzinfo


def zone_name(zone: tzinfo) -> str:
    return str(getattr(zone, "key", None) or "UTC")


def local_text(when: datetime, zone: tzinfo) -> str:
    """`2026-12-08 09:00 (Asia/Shanghai)`: what the model repeats to the member."""
    return f"{when.astimezone(zone):%Y-%m-%d %H:%M} ({zone_name(zone)})"


class JobBook:
    """Sets, lists and cancels jobs with the asker's rights and `[jobs]` caps."""

    def __init__(self, store: JobStore, policy: JobsPolicy, clock: Clock) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.on_scheduled: Callable[[], None] = _nothing
        """Told after each job is stored (`JobRunner.nudge`: its run may be the next)."""

    def is_owner(self, user_id: int | None) -> bool:
        return user_id is not None and user_id == self.policy.owner_id

    async def schedule(self, request: JobRequest) -> Job:
        """Store the job, or raise `JobRefused` (nothing stored) saying why."""
        policy = self.policy
        owner = self.is_owner(request.asker_id)
        chat = request.here_chat if request.chat is None else request.chat
        thread = request.here_thread if chat == request.here_chat else 0
        if chat != request.here_chat and not owner:
            raise JobRefused(
                "not allowed: a member schedules only in the chat they are in; leave 'chat' out"
            )
        body = request.text.strip()
        if not body:
            raise JobRefused("'text' is empty: say what to post or do")
        if len(body) > MAX_JOB_TEXT:
            raise JobRefused(f"'text' is longer than {MAX_JOB_TEXT} characters")
        if request.mode not in ("post", "task"):
            raise JobRefused(f"unknown mode {request.mode!r}: use 'post' or 'task'")
        now = self.clock.now()
        zone = request.zone
        try:
            at = resolve_at(request.at, zone)
            repeat = _repeat_text(request.repeat)
            due, cron = first_run(at, repeat, zone)
        except ScheduleError as exc:
            raise JobRefused(str(exc)) from None
        if due <= now:
            raise JobRefused(
                f"{local_text(due, zone)} is in the past (it is now {local_text(now, zone)}); "
                "give a time in the future"
            )
        if due > now + timedelta(days=policy.max_days_ahead):
            raise JobRefused(
                f"{local_text(due, zone)} is more than {policy.max_days_ahead} days ahead"
            )
        if cron is not None and not owner:
            gap = shortest_gap(cron, due - timedelta(seconds=1), zone)
            if gap < timedelta(minutes=policy.min_repeat_minutes):
                raise JobRefused(
                    f"repeats every {int(gap.total_seconds() // 60)} minutes; members may "
                    f"repeat at most every {policy.min_repeat_minutes} minutes"
                )
        if not owner:
            mine = await self.store.list_jobs(creator_id=request.asker_id)
            if len(mine) >= policy.per_member:
                raise JobRefused(
                    f"you have {len(mine)} active jobs, the most a member may have "
                    f"({policy.per_member}); cancel one first"
                )
        in_chat = await self.store.list_jobs(chat_id=chat)
        if len(in_chat) >= policy.per_chat:
            raise JobRefused(
                f"this chat has {len(in_chat)} active jobs, its most ({policy.per_chat})"
            )
        job = await self.store.add_job(
            NewJob(
                chat_id=chat,
                thread_id=thread,
                creator_id=request.asker_id,
                creator_name=request.asker_name,
                text=body,
                mode=request.mode,
                repeat=repeat,
                zone=zone_name(zone),
                reply_to=request.reply_to if chat == request.here_chat else None,
                first_at=due,
                created_at=now,
            )
        )
        self.on_scheduled()
        return job

    async def visible(self, asker_id: int | None, chat_id: int) -> tuple[Job, ...]:
        """The active jobs the asker may see from this chat: the chat's; the owner in a
        private chat sees every chat's."""
        if self.is_owner(asker_id) and chat_id > 0:
            return await self.store.list_jobs()
        return await self.store.list_jobs(chat_id=chat_id)

    async def cancel(
        self,
        asker_id: int | None,
        name: str,
        *,
        here_chat: int,
        is_admin: Callable[[int], Awaitable[bool]],
    ) -> Job:
        """Cancel one's own job, any job of a chat one administers, or (the owner) any."""
        job_id = parse_job_name(name)
        job = None if job_id is None else await self.store.get_job(job_id)
        if job is None or job.status != "active":
            raise JobRefused(f"no active job {name!r}", key="jobs_not_found")
        owner = self.is_owner(asker_id)
        if not owner and job.chat_id != here_chat:
            raise JobRefused(f"no active job {name!r} in this chat", key="jobs_not_found")
        allowed = owner or (asker_id is not None and asker_id == job.creator_id)
        if not allowed and asker_id is not None and here_chat < 0:
            allowed = await is_admin(job.chat_id)
        if not allowed:
            raise JobRefused(
                f"not allowed: {job.name} was set by {job.creator_name or job.creator_id}; "
                "only they, the chat's administrators or the owner may cancel it",
                key="jobs_not_yours",
            )
        await self.store.cancel_job(job.id, self.clock.now())
        return job


def _nothing() -> None:
    return None


def _repeat_text(repeat: str | None) -> str | None:
    if repeat is None or not repeat.strip() or repeat.strip().lower() in ("none", "once"):
        return None
    word = repeat.strip().lower()
    return word if word in REPEAT_WORDS else " ".join(repeat.split())


# ---------------------------------------------------------------- running due jobs


def _zone(job: Job) -> tzinfo:
    try:
        return ZoneInfo(job.zone)
    except (ValueError, KeyError):
        return ZoneInfo("UTC")


TaskTurn = Callable[[SessionInfo, TaskInstruction, int | None], Awaitable[TurnOutcome]]
"""Runs a `task` job's turn in its session with its instruction, replying to the message
id given (or none); the caller holds the turn lock."""

TurnLock = Callable[[SessionInfo], AbstractAsyncContextManager[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDelivery:
    """Where the runner sends and stores: the outbound chain for posts, `notices` (noted
    for the next turn there) for what creators are told, the chat's turn lock."""

    messenger: Messenger
    notices: Messenger
    sessions: SessionStore
    history: HistoryStore
    turn_lock: TurnLock
    bot_id: int | None
    bot_name: str
    locale_for_chat: Callable[[int], Locale]
    task_turn: TaskTurn | None = None


class JobRunner:
    """Claims each run when it is due and delivers it once (module docstring)."""

    def __init__(
        self, store: JobStore, policy: JobsPolicy, clock: Clock, delivery: JobDelivery
    ) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.delivery = delivery
        self.worker = uuid.uuid4().hex[:12]
        self.ran = 0
        self._scheduled = asyncio.Event()

    def nudge(self) -> None:
        """A job was added in this process: look again now (its run may be the next)."""
        self._scheduled.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop`: release runs a dead worker left, then claim and deliver each run
        when it is due."""
        try:
            now = self.clock.now()
            await self.store.release_interrupted(now - INTERRUPTED_AFTER, now)
        except Exception:
            log.exception("jobs: releasing interrupted runs failed")
        while not stop.is_set():
            self._scheduled.clear()  # before the read: a job added after it wakes the sleep
            wait = self.policy.poll_seconds
            try:
                due = await self.store.next_due()
                if due is not None and due <= self.clock.now():
                    await self.tick()
                    due = await self.store.next_due()
                wait = self._until(due)
            except Exception:
                log.exception("jobs: a round of due runs failed")
            await self._sleep(stop, wait)

    def _until(self, due: datetime | None) -> float:
        """Seconds to sleep: until the next run is due, at most `poll_seconds` when other
        processes add runs too, else at most `QUIET_POLL_SECONDS`."""
        policy = self.policy
        most = (
            policy.poll_seconds
            if self.store.shared
            else max(policy.poll_seconds, QUIET_POLL_SECONDS)
        )
        if due is None:
            return most
        return min(most, max(SHORTEST_SLEEP, (due - self.clock.now()).total_seconds()))

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._scheduled.wait())]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def tick(self) -> int:
        """Claim what is due now and deliver it; the number of runs claimed."""
        claimed = await self.store.claim_due(self.clock.now(), self.worker)
        for item in claimed:
            try:
                await self.deliver(item)
            except Exception as exc:
                log.exception("jobs: run %s of %s crashed", item.run.id, item.job.name)
                await self.store.finish_run(
                    item.run.id, "failed", self.clock.now(), error=f"internal error: {exc}"
                )
        self.ran += len(claimed)
        return len(claimed)

    async def deliver(self, item: ClaimedRun) -> None:
        job, run = item.job, item.run
        now = self.clock.now()
        due = run.due_at
        overdue = (now - due).total_seconds()
        if overdue > self.policy.misfire_grace_seconds and job.repeat is not None:
            # several periods missed: the latest one runs, once, if it is within the grace
            due = latest_due(job, due, now, _zone(job))
            overdue = (now - due).total_seconds()
        if overdue > self.policy.misfire_grace_seconds and run.attempts == 1:
            await self.store.finish_run(
                run.id, "missed", now, error=f"the bot was not running at {due:%H:%M} UTC"
            )
            log.info("jobs: %s missed (%.0f s late)", job.name, overdue)
            await self._tell_creator(job, "jobs_missed", when=self._local(job, due))
            return
        # late: the bot was not running at its time (a run Telegram made wait is not)
        late = run.attempts == 1 and overdue > self.policy.late_after_seconds
        session = await self._session(job)
        async with self.delivery.turn_lock(session):
            if job.mode == "task":
                await self._task(item, session, due=due, late=late)
                return
            body = job.text
            if late:
                note = text(
                    self.delivery.locale_for_chat(job.chat_id),
                    "jobs_late_note",
                    when=self._local(job, due),
                )
                body = f"{note}\n{body}"
            sent = await self.delivery.messenger.send_text(
                job.chat_id, body, thread_id=job.thread_id, reply_to=job.reply_to
            )
            if sent.delivered:
                await self._store_post(session, job, sent)
        await self._record(item, sent, late=late)

    async def _record(self, item: ClaimedRun, sent: Delivery, *, late: bool) -> None:
        job, run = item.job, item.run
        now = self.clock.now()
        first = next((mid for mid in sent.message_ids if mid is not None), None)
        if first is not None:
            await self.store.finish_run(run.id, "delivered", now, message_id=first, late=late)
            log.info("jobs: %s delivered as message %s", job.name, first)
            return
        error = sent.error
        words = str(error) if error is not None else "Telegram confirmed no message"
        if isinstance(error, TelegramFloodWait | TelegramNetworkError) and (
            run.attempts < MAX_ATTEMPTS
        ):
            wait = (
                error.retry_after
                if isinstance(error, TelegramFloodWait)
                else RETRY_SECONDS * 2 ** (run.attempts - 1)
            )
            await self.store.retry_run(run.id, now + timedelta(seconds=max(wait, 0.5)), words)
            log.info("jobs: %s not sent yet (%s); trying again in %.1f s", job.name, words, wait)
            return
        await self.store.finish_run(run.id, "failed", now, error=words, late=late)
        log.warning("jobs: %s failed: %s", job.name, words)
        await self._tell_creator(job, "jobs_failed", reason=words)

    async def _task(
        self, item: ClaimedRun, session: SessionInfo, *, due: datetime, late: bool
    ) -> None:
        """One turn with the job as its instruction: delivered with its answer's first
        `message_id`; a turn that sent nothing (a spent budget, a model that failed on every
        route, a send Telegram refused) is failed with the reason and its creator told. A
        model call is never repeated here: it may have cost money."""
        job, run = item.job, item.run
        task_turn = self.delivery.task_turn
        if task_turn is None:
            await self.store.finish_run(
                run.id, "failed", self.clock.now(), error="task jobs are not wired"
            )
            return
        instruction = TaskInstruction(
            job=job.name,
            creator_id=job.creator_id,
            creator_name=job.creator_name,
            due=f"{self._local(job, due)} ({job.zone})",
            text=job.text,
            late=late,
            repeat=job.repeat,
        )
        outcome = await task_turn(session, instruction, job.reply_to)
        now = self.clock.now()
        sent = outcome.delivery
        first = None
        if sent is not None and outcome.status == "answered":
            first = next((mid for mid in sent.message_ids if mid is not None), None)
        if first is not None:
            await self.store.finish_run(run.id, "delivered", now, message_id=first, late=late)
            log.info("jobs: %s answered as message %s", job.name, first)
            return
        words = outcome.error or "the turn sent no answer"
        await self.store.finish_run(run.id, "failed", now, error=words, late=late)
        log.warning("jobs: %s failed: %s", job.name, words)
        await self._tell_creator(job, "jobs_task_failed", reason=words)

    async def _session(self, job: Job) -> SessionInfo:
        key = SessionKey(chat_id=job.chat_id, thread_id=job.thread_id)
        found = await self.delivery.sessions.find_session(key)
        if found is not None:
            return found
        scene: Scene = "group" if job.chat_id < 0 else "private"
        if job.chat_id == self.policy.owner_id:
            scene = "owner"
        return await self.delivery.sessions.open_session(key, scene=scene)

    async def _store_post(self, session: SessionInfo, job: Job, sent: Delivery) -> None:
        """The post as the bot's message in the conversation (the model sees it later)."""
        body = AssistantRecord(text="\n".join(sent.texts))
        now = self.clock.now()
        await self.delivery.history.append(
            session.id,
            [
                NewRecord(
                    body=body,
                    created_at=now,
                    message_ids=sent.message_ids,
                    tokens=record_tokens(body),
                )
            ],
            platform_messages=sent.platform_messages(
                chat_id=job.chat_id,
                thread_id=job.thread_id,
                sender_id=self.delivery.bot_id,
                sender_name=self.delivery.bot_name,
                reply_to=job.reply_to,
                now=now,
            ),
        )

    def _local(self, job: Job, when: datetime) -> str:
        return f"{when.astimezone(_zone(job)):%Y-%m-%d %H:%M}"

    async def _tell_creator(self, job: Job, key: str, **values: str) -> None:
        """Tell the creator in their private chat (where the bot can reach them)."""
        chat = job.creator_id
        if chat <= 0:
            return
        message = text(
            self.delivery.locale_for_chat(chat),
            key,
            job=job.name,
            preview=job.text[:80],
            **values,
        )
        try:
            await self.delivery.notices.send_text(chat, message)
        except TelegramError as exc:
            log.info("jobs: could not tell %s about %s: %s", chat, job.name, exc)
