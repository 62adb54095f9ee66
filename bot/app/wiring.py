"""The wiring: one `App` per process from the settings, read once by the entry points.

`build_app` puts the runtime, the inbound service and the chat commands together over a
store and a messenger; `open_store`, `build_routes`, `turn_policy` and the scheduled jobs
turn settings into the adapters and plain policy values the services take; the parts that
differ between one process and several workers come from the `Topology` (`bot.app.topology`),
and every outgoing message passes the one chain `outbound_chain` builds.
Nothing outside `bot/app` reads the settings or imports `adapters` or `storage`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from adapters.llm.dialects import kind_for, options_for
from adapters.llm.openai_provider import AnthropicProvider, OpenAIProvider
from adapters.llm.scripted import ScriptedModel
from adapters.media_files import CachedMediaFiles, MediaCache, TelegramFileSource
from adapters.scheduler import build_scheduler
from adapters.tokenizers import TokenizerUnavailable, load_token_counter
from adapters.transcription import OpenAITranscriber
from bot.agent.compactor import CompactionPolicy
from bot.agent.events import NO_OBSERVER, EventBus
from bot.agent.ledger import LedgerWriter
from bot.agent.metering import TokenTruth
from bot.agent.reply import ChatActions, chat_actions_of
from bot.agent.request import PromptPolicy
from bot.agent.routes import Prices, ProfileEntry, RouteTable
from bot.agent.runtime import TurnRunner
from bot.agent.spend import (
    DEFAULT_OUTPUT_BOUND,
    ChatLimits,
    Limit,
    LocalSpendCounters,
    SpendCounters,
    SpendGuard,
    SpendPolicy,
    nanos,
)
from bot.agent.traces import TraceWriter
from bot.agent.turn import CallPolicy, ToolPolicy, TurnPolicy
from bot.agent.turn_images import TurnImages
from bot.agent.window import SceneCaps, WindowPolicy
from bot.app.dashboard.auth import owner_link
from bot.app.retention_loop import RetentionPolicy
from bot.app.telemetry import route_endpoints
from bot.app.topology import Topology, one_migration_at_a_time, topology_for
from bot.app.turn_parts import build_turn_runner
from bot.config import ChatLimitSettings, ProviderProfile, SceneHistory, Settings
from bot.context.memory_block import MemoryLimits
from bot.context.window import PerScene, ProfileCapacity, RuntimeLimits, bound_summaries
from bot.errors import ConfigError
from bot.ports import ChatLock, Clock, LLMProvider, Messenger, SystemClock
from bot.redact import register_secret
from bot.services.chat_events import ChatEventPolicy, ChatEventService
from bot.services.commands import Commands
from bot.services.daily_summary import DailySummary
from bot.services.error_log import ErrorLog
from bot.services.inbound import InboundPolicy, InboundService
from bot.services.memory import MemoryCommand
from bot.services.messenger_relay import (
    ClosedChatGuard,
    ClosedChats,
    RefusedSendLog,
    ToldUser,
    ToldUserMessenger,
)
from bot.services.recovery import CrashRecovery, RecoveryPolicy
from bot.services.send_pacing import PaceLimits
from bot.services.transcripts import TranscriptionPolicy, VoiceTranscripts
from bot.store_ports import ConversationStore, MemoryFacts
from bot.texts import ChatLocales
from bot.tools import default_tools
from bot.tools.base import Tool
from bot.tools.forget import TOOL as FORGET_TOOL
from bot.tools.remember import TOOL as REMEMBER_TOOL
from bot.tools.view_image import VIEW_IMAGE
from storage.engine import create_engine_for
from storage.memory_facts import SqlMemoryFacts
from storage.schema import schema_at_head, upgrade_in_child
from storage.spend import SqlSpendCounters
from storage.sql import SqlStore

if TYPE_CHECKING:
    from adapters.otel import OtelTracer


def build_provider(
    profile: ProviderProfile, api_key: str | None, *, timeout: float, max_retries: int
) -> OpenAIProvider:
    """The adapter of the profile's kind, speaking the dialect of its host and settings."""
    options = options_for(
        profile.base_url,
        kind=profile.kind,
        cache=profile.cache,
        cache_ttl=profile.cache_ttl,
        prompt_cache_key=profile.prompt_cache_key,
        max_tokens_param=profile.max_tokens_param,
        stream=profile.stream,
        reasoning=profile.reasoning,
        extra_body=profile.extra_body,
    )
    adapter = AnthropicProvider if options.kind == "anthropic" else OpenAIProvider
    return adapter(
        profile.base_url, api_key, timeout=timeout, max_retries=max_retries, options=options
    )


def build_routes(settings: Settings, *, offline: LLMProvider | None = None) -> RouteTable:
    """Provider profiles from the TOML plus the `default` route from LLM_* variables
    (the offline scripted model when no LLM_BASE_URL is set)."""
    timeout = settings.runtime.request_timeout_seconds
    retries = settings.runtime.max_retries
    entries: dict[str, ProfileEntry] = {}
    for name, profile in settings.providers.items():
        key = os.environ.get(profile.api_key_env) if profile.api_key_env else None
        entries[name] = ProfileEntry(
            provider=build_provider(profile, key, timeout=timeout, max_retries=retries),
            capacity=ProfileCapacity(
                name=name, model=profile.model, context_window=profile.context_window
            ),
            prices=Prices(
                input_per_mtok=profile.price_input_per_mtok,
                cached_input_per_mtok=profile.price_cached_input_per_mtok,
                output_per_mtok=profile.price_output_per_mtok,
                cache_write_per_mtok=profile.price_cache_write_per_mtok,
                cache_write_1h_per_mtok=profile.price_cache_write_1h_per_mtok,
            ),
            count_tokens=_token_counter(
                f"providers.{name}.tokenizer_file",
                profile.tokenizer_file,
                profile.tokenizer_pattern,
            ),
            wire=kind_for(profile.base_url, profile.kind),
            vision=profile.vision,
        )
    default_provider: LLMProvider
    if offline is not None:
        default_provider = offline
    elif settings.llm_base_url:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        default_provider = build_provider(
            ProviderProfile(
                base_url=settings.llm_base_url,
                kind=settings.llm_kind,
                cache=settings.llm_cache,
                cache_ttl=settings.llm_cache_ttl,
                model=settings.llm_model,
                reasoning=settings.llm_reasoning,
            ),
            key,
            timeout=timeout,
            max_retries=retries,
        )
    else:
        default_provider = ScriptedModel.demo()
    entries.setdefault(
        "default",
        ProfileEntry(
            provider=default_provider,
            capacity=ProfileCapacity(
                name="default", model=settings.llm_model, context_window=settings.llm_context_window
            ),
            count_tokens=_token_counter(
                "llm_tokenizer_file", settings.llm_tokenizer_file, settings.llm_tokenizer_pattern
            ),
            wire=kind_for(settings.llm_base_url or "", settings.llm_kind),
            vision=settings.llm_vision,
        ),
    )
    default_name = settings.default_provider or "default"
    if default_name not in entries:
        raise ConfigError("default_provider", f"no provider profile named {default_name!r}")
    default_model = entries[default_name].capacity.model or settings.llm_model
    return RouteTable(
        entries,
        default_profile=default_name,
        default_model=default_model,
        fallback_window=settings.llm_context_window,
    )


def _token_counter(
    setting: str, path: Path | None, pattern: str | None
) -> Callable[[str], int] | None:
    """The exact tokenizer an operator configured (read once, offline), or None."""
    if path is None:
        return None
    try:
        return load_token_counter(path, pattern=pattern).count
    except TokenizerUnavailable as exc:
        raise ConfigError(setting, str(exc)) from None


def window_policy(settings: Settings) -> WindowPolicy:
    """Each scene's window: the history budgets and the caps, overrides applied."""
    history = settings.history

    def caps(override: SceneHistory) -> SceneCaps:
        return SceneCaps(
            max_turns=history.max_history_turns
            if override.max_history_turns is None
            else override.max_history_turns,
            max_messages=history.max_recent_messages
            if override.max_recent_messages is None
            else override.max_recent_messages,
        )

    return WindowPolicy(
        history_budgets=PerScene(
            group=history.group_tokens,
            private=history.private_tokens,
            owner=history.owner_tokens,
        ),
        caps=PerScene(
            group=caps(history.group), private=caps(history.private), owner=caps(history.owner)
        ),
        headroom=history.headroom,
        count_unanswered_turns=history.turn_cap_counts == "all",
    )


def chat_locales(settings: Settings) -> ChatLocales:
    """`BOT_LOCALE=auto`: each member's language, a chat its members'; `zh`/`en`: fixed."""
    fixed = None if settings.bot_locale == "auto" else settings.bot_locale
    return ChatLocales(fixed=fixed, fallback=settings.fallback_locale)


def turn_policy(settings: Settings, locales: ChatLocales | None = None) -> TurnPolicy:
    rules = ""
    if settings.workspace_rules_file is not None:
        try:
            rules = settings.workspace_rules_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("workspace_rules_file", str(exc)) from None
    runtime = settings.runtime
    compaction = settings.compaction
    window = window_policy(settings)
    limits = RuntimeLimits(
        max_context_tokens=runtime.max_context_tokens,
        context_compact_ratio=runtime.context_compact_ratio,
        history_pruning_enabled=runtime.history_pruning.enabled,
        history_pruning_max_tokens=runtime.history_pruning.max_tokens,
    )
    summaries = PerScene(
        group=compaction.group_tokens,
        private=compaction.private_tokens,
        owner=compaction.owner_tokens,
    )
    return TurnPolicy(
        window=window,
        prompt=PromptPolicy(
            zone=settings.zone,
            zone_name=settings.bot_timezone,
            locale=settings.fallback_locale,
            command_prefix=settings.triggers.command_prefix,
            workspace_rules=rules,
            owner_id=settings.owner_id,
            chat_locale=locales.for_chat if locales is not None else None,
        ),
        calls=CallPolicy(
            limits=limits,
            max_output_tokens=runtime.max_output_tokens,
            deadline_seconds=runtime.model_call_deadline_seconds,
        ),
        tools=ToolPolicy(
            max_result_chars=runtime.max_tool_result_chars,
            max_calls_per_step=runtime.max_tool_calls_per_step,
            max_messages_per_turn=runtime.max_messages_per_turn,
        ),
        compaction=CompactionPolicy(
            summary_budgets=bound_summaries(summaries, window.history_budgets),
            route=compaction.route,
            prepare_margin=compaction.prepare_margin,
        )
        if compaction.enabled
        else None,
        max_tool_iterations=runtime.max_tool_iterations,
        turn_deadline_seconds=runtime.turn_deadline_seconds,
    )


def spend_policy(settings: Settings, locales: ChatLocales | None = None) -> SpendPolicy:
    """`[limits]` resolved: the shared limits, each scene's and each chat id's overrides."""
    limits = settings.limits

    def chat_limits(override: ChatLimitSettings, base: ChatLimits) -> ChatLimits:
        def pick(value: float | None, fallback: int, scale: bool) -> int:
            if value is None:
                return fallback
            return nanos(value) if scale else int(value)

        return ChatLimits(
            chat=Limit(
                cost=pick(override.chat_daily_cost, base.chat.cost, True),
                tokens=pick(override.chat_daily_tokens, base.chat.tokens, False),
            ),
            member=Limit(
                cost=pick(override.member_daily_cost, base.member.cost, True),
                tokens=pick(override.member_daily_tokens, base.member.tokens, False),
            ),
        )

    shared = ChatLimits(
        chat=Limit(cost=nanos(limits.chat_daily_cost), tokens=limits.chat_daily_tokens),
        member=Limit(cost=nanos(limits.member_daily_cost), tokens=limits.member_daily_tokens),
    )
    scenes = PerScene(
        group=chat_limits(limits.group, shared),
        private=chat_limits(limits.private, shared),
        owner=chat_limits(limits.owner, shared),
    )
    # a chat id's override sits over its scene's; a group id is negative, a private
    # chat's is its member's id
    chats = {
        int(chat): chat_limits(override, scenes.group if int(chat) < 0 else scenes.private)
        for chat, override in limits.chats.items()
    }
    return SpendPolicy(
        daily=Limit(cost=nanos(limits.daily_cost), tokens=limits.daily_tokens),
        monthly=Limit(cost=nanos(limits.monthly_cost), tokens=limits.monthly_tokens),
        scenes=scenes,
        chats=chats,
        owner_id=settings.owner_id,
        owner_exempt=limits.owner_exempt,
        zone=settings.zone,
        zone_name=settings.bot_timezone,
        locale=settings.fallback_locale,
        chat_locale=locales.for_chat if locales is not None else None,
        currency=settings.ledger.currency,
        output_bound=settings.runtime.max_output_tokens or DEFAULT_OUTPUT_BOUND,
        hold_wait_seconds=settings.runtime.model_call_deadline_seconds,
    )


def open_spend_counters(store: ConversationStore) -> SpendCounters:
    """The spend counters: a table on SQLite (a restart keeps the spend) and PostgreSQL
    (shared by the workers, one statement per check); in memory for the in-memory store."""
    if isinstance(store, SqlStore):
        return SqlSpendCounters(store.engine)
    return LocalSpendCounters()


def open_memory_facts(store: ConversationStore) -> MemoryFacts | None:
    """The facts `remember` keeps, in the store's database; None (memory off) for a store
    without one (the in-memory store of tests)."""
    if isinstance(store, SqlStore):
        return SqlMemoryFacts(store.engine)
    return None


def memory_limits(settings: Settings) -> MemoryLimits:
    memory = settings.memory
    return MemoryLimits(
        max_tokens=memory.max_tokens,
        per_member=memory.per_member,
        per_chat=memory.per_chat,
        max_fact_chars=memory.max_fact_chars,
    )


def with_memory_tools(memory: MemoryFacts | None, tools: Sequence[Tool]) -> tuple[Tool, ...]:
    """`remember` and `forget` are offered only where facts can be kept."""
    if memory is not None:
        return tuple(tools)
    return tuple(
        t for t in tools if t.spec.name not in (REMEMBER_TOOL.spec.name, FORGET_TOOL.spec.name)
    )


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


def pace_limits(settings: Settings) -> PaceLimits:
    """Telegram's send limits (`[telegram] per_chat_per_second`, `per_group_per_minute`,
    `per_bot_per_second`), kept where the topology keeps them."""
    return PaceLimits(
        per_chat_per_second=settings.telegram.per_chat_per_second,
        per_group_per_minute=settings.telegram.per_group_per_minute,
        per_bot_per_second=settings.telegram.per_bot_per_second,
    )


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
    chat_actions = outbound.actions
    messenger = outbound.turns
    routes = build_routes(settings, offline=offline)
    ledger = LedgerWriter(settings.traces_dir, settings.zone)
    truth = TokenTruth.load(settings.data_dir)
    # shared: `tgbot run` adopts the whole table before its first turn (`truth.load_shared`)
    truth.shared = topology.token_corrections()
    bus = EventBus()
    locales = chat_locales(settings)
    if tracing is not None:  # first on the bus: a model call's span ends as it is published
        tracing.attach(
            bus,
            agent_name=bot_name,
            endpoints=route_endpoints(settings, offline=offline is not None),
        )
    spend = None
    policy = spend_policy(settings, locales)
    if policy.active:  # after the ledger's subscriber: a call is counted as it is written
        spend = SpendGuard(
            policy=policy, counters=open_spend_counters(store), messenger=messenger, clock=clock
        )
    memory = open_memory_facts(store)
    traces = TraceWriter(
        settings.traces_dir,
        keep_days=settings.ledger.keep_requests_days,
        max_total_bytes=settings.ledger.max_traces_mb * 1024 * 1024,
    ).attach(bus)
    outside = outbound.outside
    """What services send outside model turns; the next turn there is told."""
    runner = build_turn_runner(
        told=told,
        store=store,
        messenger=messenger,
        routes=routes,
        tools=with_memory_tools(memory, (*offered_tools(settings), *extra_tools)),
        memory=memory,
        memory_limits=memory_limits(settings),
        ledger=ledger,
        clock=clock,
        policy=turn_policy(settings, locales),
        bus=bus,
        bot_id=bot_id,
        bot_name=bot_name,
        chat_actions=chat_actions,
        stream_drafts=settings.telegram.stream_drafts,
        truth=truth,
        observer=tracing if tracing is not None else NO_OBSERVER,
        spend=spend,
        images=(
            images := TurnImages(
                files=(files := media_files(settings)),
                messages=store,
                aliases=store,
                max_per_turn=settings.media.max_images_per_turn,
                prefetch=sees_images(settings),
            )
        ),
    )
    if spend is not None:
        spend.attach(bus)

    async def usage_reply() -> tuple[str, bytes | None]:
        summary = daily_summary(settings, messenger=outside, store=store, clock=clock)
        today = clock.now().astimezone(settings.zone).date()
        message = await summary.compose(today)
        if spend is not None:  # the budgets too, as `/budget` shows them
            return f"{message.text}\n\n{await spend.report()}", message.chart
        return message.text, message.chart

    commands = Commands(
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
        memory=None if memory is None else MemoryCommand(memory, memory_limits(settings)),
    )
    inbound_policy = InboundPolicy(
        owner_id=settings.owner_id,
        locale=settings.fallback_locale,
        answer_on_mention=settings.triggers.answer_on_mention,
        answer_on_reply=settings.triggers.answer_on_reply,
        answer_on_command=settings.triggers.answer_on_command,
        merge_window_seconds=settings.triggers.merge_window_seconds,
        allowed_chats=tuple(settings.security.allowed_chats),
        private_chats=settings.security.private_chats,
        user_messages_per_minute=settings.security.user_messages_per_minute,
        chat_messages_per_minute=settings.security.chat_messages_per_minute,
    )
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
            per_user=settings.security.user_messages_per_minute,
            per_chat=settings.security.chat_messages_per_minute,
        ),
        transcripts=voice_transcripts(settings, files=files, ledger=ledger, clock=clock),
        locales=locales,
    )
    inbound.turns.on_scheduled = images.prefetch
    if memory is not None:  # a group upgraded to a supergroup keeps its facts
        inbound.on_chat_migrated = memory.move_chat_facts
    recovery = CrashRecovery(
        sessions=store,
        history=store,
        platform_messages=store,
        runner=runner,
        messenger=outside,
        clock=clock,
        turns=inbound.turns,
        policy=RecoveryPolicy(
            locale=inbound_policy.locale,
            chat_locale=locales.for_chat,
            rules=inbound_policy.rules,
            allowed_chats=inbound_policy.allowed_chats,
            private_chats=inbound_policy.private_chats,
            owner_id=inbound_policy.owner_id,
        ),
        spent_for=spend.spent_for if spend is not None else None,
    )
    commands.retry = inbound.retry
    chat_events = ChatEventService(
        sessions=store,
        platform_messages=store,
        events=store,
        policy=ChatEventPolicy(
            owner_id=settings.owner_id,
            bot_id=bot_id,
            allowed_chats=tuple(settings.security.allowed_chats),
            private_chats=settings.security.private_chats,
        ),
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
    )


def voice_transcripts(
    settings: Settings, *, files: CachedMediaFiles | None, ledger: LedgerWriter, clock: Clock
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


def retention_policy(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(
        keep_records_days=settings.retention.keep_records_days,
        keep_platform_events_days=settings.retention.keep_platform_events_days,
    )
