"""The wiring: one `App` per process from the settings, read once by the entry points.

`build_app` puts the runtime, the inbound service and the chat commands together over a
store and a messenger; `open_store`, `open_chat_lock`, `build_routes`, `turn_policy` and the
scheduled jobs turn settings into the adapters and plain policy values the services take.
Nothing outside `bot/app` reads the settings or imports `adapters` or `storage`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.scripted import ScriptedModel
from adapters.scheduler import build_scheduler
from bot.agent.events import EventBus
from bot.agent.ledger import LedgerWriter
from bot.agent.routes import Prices, ProviderEntry, RouteTable
from bot.agent.runtime import TurnPolicy, TurnRunner
from bot.app.retention_loop import RetentionPolicy
from bot.config import Settings
from bot.context.budget import ProviderCapacity, RuntimeLimits
from bot.errors import ConfigError
from bot.ports import ChatLock, Clock, ConversationStore, LLMProvider, Messenger
from bot.services.chat_lock import LocalChatLock
from bot.services.commands import Commands
from bot.services.daily_summary import DailySummary
from bot.services.inbound import InboundPolicy, InboundService
from bot.tools import default_tools
from storage.engine import create_engine_for, is_sqlite, normalise_url
from storage.locks import MIGRATION_LOCK_ID, AdvisoryChatLock
from storage.migrate import upgrade_database
from storage.sql import SqlStore


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def build_routes(settings: Settings, *, offline: LLMProvider | None = None) -> RouteTable:
    """Provider profiles from the TOML plus the `default` route from LLM_* variables
    (the offline scripted model when no LLM_BASE_URL is set)."""
    timeout = settings.runtime.request_timeout_seconds
    retries = settings.runtime.max_retries
    entries: dict[str, ProviderEntry] = {}
    for name, profile in settings.providers.items():
        key = os.environ.get(profile.api_key_env) if profile.api_key_env else None
        entries[name] = ProviderEntry(
            provider=OpenAIProvider(profile.base_url, key, timeout=timeout, max_retries=retries),
            capacity=ProviderCapacity(
                name=name, model=profile.model, context_window=profile.context_window
            ),
            prices=Prices(
                input_per_mtok=profile.price_input_per_mtok,
                cached_input_per_mtok=profile.price_cached_input_per_mtok,
                output_per_mtok=profile.price_output_per_mtok,
            ),
        )
    default_provider: LLMProvider
    if offline is not None:
        default_provider = offline
    elif settings.llm_base_url:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        default_provider = OpenAIProvider(
            settings.llm_base_url, key, timeout=timeout, max_retries=retries
        )
    else:
        default_provider = ScriptedModel.demo()
    entries.setdefault(
        "default",
        ProviderEntry(
            provider=default_provider,
            capacity=ProviderCapacity(
                name="default", model=settings.llm_model, context_window=settings.llm_context_window
            ),
        ),
    )
    default_name = settings.default_provider or "default"
    if default_name not in entries:
        raise ConfigError("default_provider", f"no provider profile named {default_name!r}")
    default_model = entries[default_name].capacity.model or settings.llm_model
    return RouteTable(
        entries,
        default_provider=default_name,
        default_model=default_model,
        fallback_window=settings.llm_context_window,
    )


def turn_policy(settings: Settings) -> TurnPolicy:
    rules = ""
    if settings.workspace_rules_file is not None:
        try:
            rules = settings.workspace_rules_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("workspace_rules_file", str(exc)) from None
    runtime = settings.runtime
    history = settings.history
    return TurnPolicy(
        scene_budgets={
            "group": history.group_tokens,
            "private": history.private_tokens,
            "owner": history.owner_tokens,
        },
        max_turns=history.max_history_turns,
        max_messages=history.max_recent_messages,
        headroom=history.headroom,
        limits=RuntimeLimits(
            max_context_tokens=runtime.max_context_tokens,
            context_compact_ratio=runtime.context_compact_ratio,
            history_pruning_enabled=runtime.history_pruning.enabled,
            history_pruning_max_tokens=runtime.history_pruning.max_tokens,
        ),
        max_tool_iterations=runtime.max_tool_iterations,
        max_tool_result_chars=runtime.max_tool_result_chars,
        max_output_tokens=runtime.max_output_tokens,
        locale=settings.bot_locale,
        zone=settings.zone,
        zone_name=settings.bot_timezone,
        command_prefix=settings.triggers.command_prefix,
        workspace_rules=rules,
        owner_id=settings.owner_id,
    )


@dataclass(slots=True)
class App:
    """The wired application (one per process)."""

    settings: Settings
    store: ConversationStore
    runner: TurnRunner
    inbound: InboundService
    commands: Commands
    routes: RouteTable
    ledger: LedgerWriter
    bus: EventBus


async def open_store(settings: Settings) -> ConversationStore:
    url = settings.resolved_database_url
    if is_sqlite(normalise_url(url)):
        await upgrade_database(url)
    else:  # workers starting together migrate one after the other
        migrations = AdvisoryChatLock.for_url(url)
        try:
            async with migrations.hold_id(MIGRATION_LOCK_ID):
                await upgrade_database(url)
        finally:
            await migrations.close()
    return SqlStore(create_engine_for(url))


def open_chat_lock(settings: Settings) -> ChatLock:
    """Per-chat serialisation: asyncio locks on SQLite (one worker), PostgreSQL advisory
    locks otherwise (several workers on one database)."""
    url = settings.resolved_database_url
    if is_sqlite(normalise_url(url)):
        return LocalChatLock()
    return AdvisoryChatLock.for_url(url)


def build_app(
    settings: Settings,
    *,
    store: ConversationStore,
    messenger: Messenger,
    bot_id: int | None,
    bot_name: str,
    clock: Clock | None = None,
    offline: LLMProvider | None = None,
    chat_lock: ChatLock | None = None,
) -> App:
    clock = clock or SystemClock()
    routes = build_routes(settings, offline=offline)
    ledger = LedgerWriter(settings.traces_dir, settings.zone)
    bus = EventBus()
    runner = TurnRunner(
        store=store,
        platform_messages=store,
        messenger=messenger,
        routes=routes,
        tools=default_tools(),
        ledger=ledger,
        clock=clock,
        policy=turn_policy(settings),
        bus=bus,
        bot_id=bot_id,
        bot_name=bot_name,
    )

    async def usage_reply() -> tuple[str, bytes | None]:
        summary = daily_summary(settings, messenger=messenger, store=store, clock=clock)
        today = clock.now().astimezone(settings.zone).date()
        message = await summary.compose(today)
        return message.text, message.chart

    commands = Commands(
        owner_id=settings.owner_id,
        locale=settings.bot_locale,
        messenger=messenger,
        store=store,
        routes=routes,
        meters=runner.meters.get,
        usage_reply=usage_reply,
    )
    inbound = InboundService(
        store=store,
        runner=runner,
        messenger=messenger,
        clock=clock,
        policy=InboundPolicy(
            owner_id=settings.owner_id,
            locale=settings.bot_locale,
            answer_on_mention=settings.triggers.answer_on_mention,
            answer_on_reply=settings.triggers.answer_on_reply,
            answer_on_command=settings.triggers.answer_on_command,
            merge_window_seconds=settings.triggers.merge_window_seconds,
            allowed_chats=tuple(settings.security.allowed_chats),
            user_messages_per_minute=settings.security.user_messages_per_minute,
            chat_messages_per_minute=settings.security.chat_messages_per_minute,
        ),
        commands=commands,
        chat_lock=chat_lock,
    )
    commands.retry = inbound.retry
    return App(
        settings=settings,
        store=store,
        runner=runner,
        inbound=inbound,
        commands=commands,
        routes=routes,
        ledger=ledger,
        bus=bus,
    )


def daily_summary(
    settings: Settings, *, messenger: Messenger, store: ConversationStore, clock: Clock
) -> DailySummary:
    return DailySummary(
        settings.traces_dir,
        settings.zone,
        settings.owner_id or 0,
        messenger,
        store,
        clock,
        locale=settings.bot_locale,
    )


def start_daily_summary(app: App, messenger: Messenger) -> AsyncIOScheduler | None:
    """Schedule yesterday's report to the owner; None when disabled or no owner is set."""
    settings = app.settings
    if not settings.schedule.daily_summary or settings.owner_id is None:
        return None
    summary = daily_summary(settings, messenger=messenger, store=app.store, clock=SystemClock())
    scheduler = build_scheduler(
        jobstore_url=f"sqlite:///{(settings.data_dir / 'scheduler.sqlite3').as_posix()}",
        zone=settings.zone,
        daily_time=settings.schedule.daily_summary_time,
        misfire_grace_seconds=settings.schedule.misfire_grace_seconds,
        job=summary.send_yesterday,
    )
    scheduler.start()
    return scheduler


def retention_policy(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(
        keep_records_days=settings.retention.keep_records_days,
        keep_platform_events_days=settings.retention.keep_platform_events_days,
    )
