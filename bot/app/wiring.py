"""The wiring: one `App` per process from the settings, read once by the entry points.

`build_app` puts the runtime, the inbound service and the chat commands together over a
store and a messenger; `open_store`, `bot.app.model_routes` and the scheduled jobs turn
settings into adapters, `bot.app.policies` into the plain policy values the services take;
the parts that differ between one process and several workers come from the `Topology`
(`bot.app.topology`), and every outgoing message passes the one chain `outbound_chain` builds.
Nothing outside `bot/app` reads the settings or imports `adapters` or `storage`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from adapters.document_worker import DocumentReader
from adapters.media_files import CachedMediaFiles, MediaCache, TelegramFileSource
from adapters.scheduler import build_scheduler
from adapters.transcription import OpenAITranscriber
from bot.agent.events import NO_OBSERVER, EventBus
from bot.agent.ledger_file import LedgerWriter
from bot.agent.metering import TokenTruth
from bot.agent.reply import ChatActions, chat_actions_of
from bot.agent.routes import RouteTable
from bot.agent.runtime import TurnRunner
from bot.agent.spend import SpendGuard
from bot.agent.spend_counters import LocalSpendCounters, SpendCounters
from bot.agent.trace_writer import TraceWriter
from bot.agent.turn_images import TurnImages
from bot.agent.turn_log import TurnLog
from bot.app.dashboard.auth import owner_link
from bot.app.member_services import (
    MemberServices,
    add_chat_commands,
    ambient_listener,
    member_services,
)
from bot.app.model_routes import build_routes
from bot.app.policies import (
    chat_event_policy,
    chat_locales,
    inbound_policy_of,
    recovery_policy,
    spend_policy,
    turn_policy,
)
from bot.app.private_chats import private_members
from bot.app.telemetry import route_endpoints
from bot.app.topology import Topology, one_migration_at_a_time, topology_for
from bot.app.turn_parts import build_turn_runner
from bot.clock import SystemClock
from bot.config import Settings
from bot.ports import ChatLock, Clock, LLMProvider, Messenger
from bot.redact import register_secret
from bot.services.ambient import AmbientListener
from bot.services.chat_events import ChatEventService
from bot.services.commands import Commands
from bot.services.daily_summary import DailySummary
from bot.services.error_log import ErrorLog
from bot.services.inbound import InboundService
from bot.services.jobs import JobBook
from bot.services.messenger_relay import (
    ClosedChatGuard,
    ClosedChats,
    RefusedSendLog,
    ToldUser,
    ToldUserMessenger,
)
from bot.services.private_members import PrivateMembers
from bot.services.recovery import CrashRecovery, SpentFor
from bot.services.transcripts import TranscriptionPolicy, VoiceTranscripts
from bot.store_ports import ConversationStore
from bot.texts import ChatLocales
from bot.tools import default_tools
from bot.tools.base import Tool
from bot.tools.view_image import VIEW_IMAGE
from storage.engine import create_engine_for
from storage.schema import schema_at_head, upgrade_in_child
from storage.spend import SqlSpendCounters
from storage.sql import SqlStore

if TYPE_CHECKING:
    from adapters.otel import OtelTracer


def open_spend_counters(store: ConversationStore) -> SpendCounters:
    """The spend counters: a table on SQLite (a restart keeps the spend) and PostgreSQL
    (shared by the workers, one statement per check); in memory for the in-memory store."""
    if isinstance(store, SqlStore):
        return SqlSpendCounters(store.engine)
    return LocalSpendCounters()


@dataclass(slots=True)
class App:
    """The wired application (one per process)."""

    settings: Settings
    store: ConversationStore
    runner: TurnRunner
    inbound: InboundService
    recovery: CrashRecovery
    """Run once at start-up, before the first update (`recover`)."""
    commands: Commands
    routes: RouteTable
    ledger: LedgerWriter
    bus: EventBus
    told: ToldUser
    """`[Already told the user]`: in memory, or the workers' shared table on PostgreSQL."""
    chat_events: ChatEventService
    """The `ChatEventSink`: the bot's membership of chats, reactions on its messages."""
    messenger: Messenger
    """The messenger every outbound path uses: sends nothing to a closed chat."""
    outside: Messenger
    """`messenger`, noting for the next turn what services send outside model turns."""
    topology: Topology
    """One process or several workers (`bot.app.topology`)."""
    spend: SpendGuard | None = None
    """Spend limits (`[limits]`); None when none is set."""
    locales: ChatLocales | None = None
    """Whose language the bot speaks (`BOT_LOCALE=auto`: each member's, a chat's)."""
    traces: TraceWriter | None = None
    """Per-call traces; `flush` on a clean stop writes the ones still held."""
    jobs: JobBook | None = None
    """Reminders and scheduled posts (`[jobs]`); `start_jobs` runs the due ones."""


async def open_store(settings: Settings, *, serving: bool = False) -> ConversationStore:
    """The store, its schema created or migrated first when it is not at head. A serving
    process (`tgbot run`) has that done by a child process, so Alembic (~11 MB resident for
    the process's life) never enters it; a one-off command runs Alembic itself."""
    url = settings.resolved_database_url
    if not await schema_at_head(url):  # the usual start does not even import Alembic
        async with one_migration_at_a_time(url):
            if serving:
                await upgrade_in_child(url)
            else:
                from storage.migrate import upgrade_database

                await upgrade_database(url)
    return SqlStore(create_engine_for(url))


@dataclass(frozen=True, slots=True)
class Outbound:
    """The outgoing chain over one sender (the Telegram adapter, paced, or a test's)."""

    turns: Messenger
    """What model turns and spend notices send through: a send Telegram refuses is logged
    (not a closed chat's), and a chat the bot left hears nothing more."""
    outside: Messenger
    """`turns`, noting what is sent for the next turn there (`[Already told the user]`):
    commands, refusals, recovery notices and the daily summary."""
    actions: ChatActions | None
    """Typing, straight from the sender (it goes only where turns run)."""


def outbound_chain(
    settings: Settings, sender: Messenger, *, closed: ClosedChats, told: ToldUser
) -> Outbound:
    """The one outbound door: turns, tools, commands, refusals, the daily summary and
    recovery notices all send through it, so a chat the bot left hears nothing more."""
    # next to the adapter: only what Telegram refused (not a closed chat's) is an error
    turns = ClosedChatGuard(
        RefusedSendLog(sender, ErrorLog(settings.traces_dir, settings.zone)),
        closed.is_chat_closed,
    )
    return Outbound(
        turns=turns, outside=ToldUserMessenger(turns, told), actions=chat_actions_of(sender)
    )


def register_settings_secrets(settings: Settings) -> None:
    """Every secret the settings name, for `bot.redact.scrub` (logs, ledger, errors)."""
    for secret in (settings.bot_token, settings.llm_api_key, settings.webhook_secret):
        if secret is not None:
            register_secret(secret.get_secret_value())
    for profile in settings.providers.values():
        if profile.api_key_env:
            register_secret(os.environ.get(profile.api_key_env))
    for server in settings.mcp.servers:  # an MCP server's env values and headers
        for secret in (*server.env.values(), *server.headers.values()):
            register_secret(secret.get_secret_value())
    if settings.transcription.api_key_env:
        register_secret(os.environ.get(settings.transcription.api_key_env))


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
    tracing: OtelTracer | None = None,
    extra_tools: Sequence[Tool] = (),
    topology: Topology | None = None,
) -> App:
    """The app over `store` and `messenger` (the sender the outbound chain wraps);
    `tracing` (`bot.app.telemetry.start_tracing`) traces every turn, model call and tool
    call; `extra_tools` come after the bot's own (the MCP servers', `bot.app.mcp_servers`);
    `topology` is the store's (`topology_for`) unless given."""
    register_settings_secrets(settings)
    clock = clock or SystemClock()
    topology = topology or topology_for(store)
    closed_chats = ClosedChats(store)
    # kept until a turn that carried them is answered: in memory, or shared on PostgreSQL
    told = ToldUser(topology.told_notes())
    outbound = outbound_chain(settings, messenger, closed=closed_chats, told=told)
    sender, messenger = messenger, outbound.turns
    routes = build_routes(settings, offline=offline)
    ledger = LedgerWriter(settings.traces_dir, settings.zone)
    truth = TokenTruth.load(settings.data_dir)
    # shared: `tgbot run` adopts the whole table before its first turn (`truth.load_shared`)
    truth.shared = topology.token_corrections()
    bus = EventBus()
    locales = chat_locales(settings)
    members = member_services(settings, store, clock)
    if tracing is not None:  # first on the bus: a model call's span ends as it is published
        tracing.attach(
            bus,
            agent_name=bot_name,
            endpoints=route_endpoints(settings, offline=offline is not None),
        )
    # after the ledger's subscriber: a call is counted as it is written
    spend = spend_guard(settings, locales, store=store, messenger=messenger, clock=clock)
    traces = trace_writer(settings).attach(bus)
    outside = outbound.outside
    """What services send outside model turns; the next turn there is told."""
    runner = build_turn_runner(
        told=told,
        store=store,
        messenger=messenger,
        routes=routes,
        tools=members.tools(offered_tools(settings), extra_tools),
        memory=members.memory,
        memory_limits=members.memory_limits,
        ledger=ledger,
        clock=clock,
        policy=turn_policy(settings, locales),
        scopes=members.scopes,
        bus=bus,
        bot_id=bot_id,
        bot_name=bot_name,
        chat_actions=outbound.actions,
        stream_drafts=settings.telegram.stream_drafts,
        truth=truth,
        observer=TurnLog(bus, tracing if tracing is not None else NO_OBSERVER),
        spend=spend,
        images=(images := turn_images(settings, store, files := media_files(settings), spend)),
    )
    if spend is not None:
        spend.attach(bus)

    commands = build_commands(
        settings,
        outside=outside,
        store=store,
        routes=routes,
        runner=runner,
        clock=clock,
        spend=spend,
        locales=locales,
    )
    inbound, recovery = build_inbound(
        settings,
        store=store,
        runner=runner,
        outside=outside,
        commands=commands,
        chat_lock=chat_lock,
        topology=topology,
        transcripts=voice_transcripts(
            settings, files=files, ledger=ledger, clock=clock, spend=spend
        ),
        locales=locales,
        clock=clock,
        spent_for=spend.spent_for if spend is not None else None,
        members=members,
        ambient=ambient_listener(settings, store, routes, runner, clock, spend),
        private=private_members(settings, store, sender),
    )
    inbound.turns.on_scheduled = images.prefetch
    commands.retry = inbound.again.retry
    add_chat_commands(
        settings,
        commands,
        members,
        store=store,
        routes=routes,
        runner=runner,
        outside=outside,
        clock=clock,
        spend=spend,
        locales=locales,
    )
    chat_events = ChatEventService(
        sessions=store,
        platform_messages=store,
        events=store,
        policy=chat_event_policy(settings, bot_id),
        clock=clock,
        closed=closed_chats,
    )
    return App(
        settings=settings,
        store=store,
        runner=runner,
        inbound=inbound,
        recovery=recovery,
        commands=commands,
        routes=routes,
        ledger=ledger,
        bus=bus,
        told=told,
        chat_events=chat_events,
        messenger=messenger,
        outside=outside,
        topology=topology,
        spend=spend,
        locales=locales,
        traces=traces,
        jobs=members.jobs,
    )


def build_inbound(
    settings: Settings,
    *,
    store: ConversationStore,
    runner: TurnRunner,
    outside: Messenger,
    commands: Commands,
    chat_lock: ChatLock | None,
    topology: Topology,
    transcripts: VoiceTranscripts | None,
    locales: ChatLocales,
    clock: Clock,
    spent_for: SpentFor | None,
    members: MemberServices,
    ambient: AmbientListener | None,
    private: PrivateMembers | None = None,
) -> tuple[InboundService, CrashRecovery]:
    """The inbound service and the crash recovery that starts turns through its scheduler
    and answers by its rules; the chats' own settings (those other workers changed read
    again when stale), the ambient judge, and a group upgraded to a supergroup keeps its
    memory facts."""
    inbound_policy = inbound_policy_of(settings)
    inbound = InboundService(
        sessions=store,
        history=store,
        platform_messages=store,
        claims=store,
        runner=runner,
        messenger=outside,
        policy=inbound_policy,
        commands=commands,
        chat_lock=chat_lock,
        limits=topology.rate_limits(
            per_user=inbound_policy.user_messages_per_minute,
            per_chat=inbound_policy.chat_messages_per_minute,
        ),
        transcripts=transcripts,
        locales=locales,
        scopes=members.scopes,
        ambient=ambient,
        refresh_settings=members.book.refresh,
        private_members=private,
    )
    if members.memory is not None:
        inbound.on_chat_migrated = members.memory.move_chat_facts
    recovery = CrashRecovery(
        sessions=store,
        history=store,
        platform_messages=store,
        runner=runner,
        messenger=outside,
        clock=clock,
        turns=inbound.turns,
        policy=recovery_policy(inbound_policy, locales),
        spent_for=spent_for,
    )
    return inbound, recovery


def trace_writer(settings: Settings) -> TraceWriter:
    """Per-call traces (`[ledger] keep_requests_days`, `max_traces_mb`)."""
    return TraceWriter(
        settings.traces_dir,
        keep_days=settings.ledger.keep_requests_days,
        max_total_bytes=settings.ledger.max_traces_mb * 1024 * 1024,
    )


def spend_guard(
    settings: Settings,
    locales: ChatLocales,
    *,
    store: ConversationStore,
    messenger: Messenger,
    clock: Clock,
) -> SpendGuard | None:
    """Spend limits (`[limits]`) over the store's counters; None when none is set."""
    policy = spend_policy(settings, locales)
    if not policy.active:
        return None
    return SpendGuard(
        policy=policy, counters=open_spend_counters(store), messenger=messenger, clock=clock
    )


def turn_images(
    settings: Settings,
    store: ConversationStore,
    files: CachedMediaFiles | None,
    spend: SpendGuard | None,
) -> TurnImages:
    """The images a turn sends (`[media]`), fetched ahead when some route sees them (never
    for a member over budget)."""
    return TurnImages(
        files=files,
        messages=store,
        aliases=store,
        max_per_turn=settings.media.max_images_per_turn,
        prefetch=sees_images(settings),
        spent_for=spend.spent_for if spend is not None else None,
    )


def build_commands(
    settings: Settings,
    *,
    outside: Messenger,
    store: ConversationStore,
    routes: RouteTable,
    runner: TurnRunner,
    clock: Clock,
    spend: SpendGuard | None,
    locales: ChatLocales,
) -> Commands:
    """The chat commands; `/usage` answers as the daily summary (and `/budget`) would."""

    async def usage_reply() -> tuple[str, bytes | None]:
        summary = daily_summary(settings, messenger=outside, store=store, clock=clock)
        today = clock.now().astimezone(settings.zone).date()
        message = await summary.compose(today)
        if spend is not None:  # the budgets too, as `/budget` shows them
            return f"{message.text}\n\n{await spend.report()}", message.chart
        return message.text, message.chart

    return Commands(
        owner_id=settings.owner_id,
        locale=settings.fallback_locale,
        messenger=outside,
        sessions=store,
        routes=routes,
        meters=runner.meters.get,
        usage_reply=usage_reply,
        locale_for=locales.for_message,
        dashboard_link=owner_link(
            settings.dashboard_url,
            settings.dashboard_token.get_secret_value() if settings.dashboard_token else None,
        ),
        budget_reply=spend.report if spend is not None else None,
    )


def sees_images(settings: Settings) -> bool:
    """Whether any route's model sees images (a profile's `vision`, or `LLM_VISION`)."""
    return settings.llm_vision or any(p.vision for p in settings.providers.values())


def offered_tools(settings: Settings) -> tuple[Tool, ...]:
    """The tools every request offers: `view_image` only when some route sees images (its
    schema sits in every cached prefix; a model that cannot see would only be refused)."""
    tools = default_tools()
    if sees_images(settings):
        return tools
    return tuple(tool for tool in tools if tool.spec.name != VIEW_IMAGE)


def media_files(settings: Settings) -> CachedMediaFiles | None:
    """Members' files through `DATA_DIR/media/` (`[media]`); None without a bot token."""
    if settings.bot_token is None:
        return None
    media = settings.media
    return CachedMediaFiles(
        TelegramFileSource(settings.telegram_api_base, settings.bot_token.get_secret_value()),
        MediaCache(
            settings.data_dir / "media",
            keep_days=media.keep_days,
            max_bytes=media.max_mb * 1024 * 1024,
        ),
        max_file_bytes=media.max_document_mb * 1024 * 1024,
        timeout_seconds=media.download_timeout_seconds,
        documents=DocumentReader(parse_seconds=media.document_parse_seconds),
    )


def voice_transcripts(
    settings: Settings,
    *,
    files: CachedMediaFiles | None,
    ledger: LedgerWriter,
    clock: Clock,
    spend: SpendGuard | None = None,
) -> VoiceTranscripts | None:
    """Voice notes as text (`[transcription]`); None without an endpoint, with `transcribe =
    "off"`, or without a way to fetch files."""
    config = settings.transcription
    if config.base_url is None or config.transcribe == "off" or files is None:
        return None
    key = os.environ.get(config.api_key_env) if config.api_key_env else None
    return VoiceTranscripts(
        transcriber=OpenAITranscriber(
            config.base_url, key, model=config.model, timeout=config.timeout_seconds
        ),
        files=files,
        ledger=ledger,
        clock=clock,
        policy=TranscriptionPolicy(
            mode=config.transcribe,
            model=config.model,
            price_per_minute=config.price_per_minute,
            timeout_seconds=config.timeout_seconds,
        ),
        spend=spend,
    )


def daily_summary(
    settings: Settings,
    *,
    messenger: Messenger,
    store: ConversationStore,
    clock: Clock,
    locales: ChatLocales | None = None,
) -> DailySummary:
    owner = settings.owner_id
    return DailySummary(
        settings.traces_dir,
        settings.zone,
        settings.owner_id or 0,
        messenger,
        store,
        clock,
        locale=settings.fallback_locale,
        reactions=store,
        currency=settings.ledger.currency,
        owner_locale=(
            (lambda: locales.for_member(owner)) if locales is not None and owner else None
        ),
    )


def start_daily_summary(app: App) -> AsyncIOScheduler | None:
    """Schedule yesterday's report to the owner; None when disabled or no owner is set."""
    settings = app.settings
    if not settings.schedule.daily_summary or settings.owner_id is None:
        return None
    summary = scheduled_summary(app)
    scheduler = build_scheduler(
        jobstore_url=f"sqlite:///{(settings.data_dir / 'scheduler.sqlite3').as_posix()}",
        zone=settings.zone,
        daily_time=settings.schedule.daily_summary_time,
        misfire_grace_seconds=settings.schedule.misfire_grace_seconds,
        job=summary.send_yesterday,
    )
    scheduler.start()
    return scheduler


def scheduled_summary(app: App) -> DailySummary:
    """The daily summary the scheduler runs, through the app's outbound chain: nothing goes
    to an owner chat the bot was removed from (the owner blocked it), and what is sent is
    noted for the next turn there (`[Already told the user]`)."""
    return daily_summary(
        app.settings,
        messenger=app.outside,
        store=app.store,
        clock=SystemClock(),
        locales=app.locales,
    )
