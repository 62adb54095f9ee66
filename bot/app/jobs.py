"""Scheduled jobs wired from the settings: the store beside the conversation store, the
`[jobs]` policy, and the loop that delivers due runs beside the updates (`start_jobs`)."""

from __future__ import annotations

import asyncio

from bot.agent.events import TurnOutcome
from bot.agent.runtime import TurnRunner
from bot.config import Settings
from bot.context.task_block import TaskInstruction
from bot.domain.ids import Locale
from bot.domain.jobs import JobStore
from bot.ports import Clock, Messenger, SessionInfo
from bot.services.jobs import JobDelivery, JobRunner, JobsPolicy, TaskTurn, TurnLock
from bot.services.local_jobs import LocalJobStore
from bot.store_ports import ConversationStore
from bot.texts import ChatLocales
from storage.jobs import SqlJobStore
from storage.sql import SqlStore


def open_job_store(store: ConversationStore) -> JobStore:
    """Jobs in the bot's database (shared by the workers); in memory beside a memory store."""
    if isinstance(store, SqlStore):
        return SqlJobStore(store.engine, database=store.database)
    return LocalJobStore()


def jobs_policy(settings: Settings) -> JobsPolicy:
    config = settings.jobs
    return JobsPolicy(
        owner_id=settings.owner_id,
        per_member=config.per_member,
        per_chat=config.per_chat,
        min_repeat_minutes=config.min_repeat_minutes,
        max_days_ahead=config.max_days_ahead,
        misfire_grace_seconds=config.misfire_grace_seconds,
        late_after_seconds=config.late_after_seconds,
        poll_seconds=config.poll_seconds,
    )


def task_turns(runner: TurnRunner) -> TaskTurn:
    """A `task` job's run: one turn on the real turn path (window, tools, send pacing,
    spend limits, fallback routes) with the job's instruction as per-turn context."""

    async def run(session: SessionInfo, task: TaskInstruction, reply_to: int | None) -> TurnOutcome:
        return await runner.run_turn(session, reply_to=reply_to, task=task)

    return run


def start_jobs(
    store: JobStore,
    policy: JobsPolicy,
    clock: Clock,
    *,
    messenger: Messenger,
    notices: Messenger,
    conversations: ConversationStore,
    turn_lock: TurnLock,
    bot_id: int | None,
    bot_name: str,
    locales: ChatLocales | None,
    fallback_locale: str,
    task_turn: TaskTurn | None,
    stop: asyncio.Event,
) -> tuple[JobRunner, asyncio.Task[None]]:
    """The runner of due jobs, started; it stops when `stop` is set."""
    fixed: Locale = "zh" if fallback_locale == "zh" else "en"

    def fixed_locale(_chat: int) -> Locale:
        return fixed

    runner = JobRunner(
        store,
        policy,
        clock,
        JobDelivery(
            messenger=messenger,
            notices=notices,
            sessions=conversations,
            history=conversations,
            turn_lock=turn_lock,
            bot_id=bot_id,
            bot_name=bot_name,
            locale_for_chat=locales.for_chat if locales is not None else fixed_locale,
            task_turn=task_turn,
        ),
    )
    return runner, asyncio.create_task(runner.run(stop), name="scheduled-jobs")
