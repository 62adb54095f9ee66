"""The composition root: reads the settings once and wires storage, adapters and services.

Every command of `tgbot` lands here. Nothing below this module reads the environment.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from bot.agent.events import EventBus
from bot.agent.ledger import LedgerWriter
from bot.agent.routes import Prices, ProviderEntry, RouteTable
from bot.agent.runtime import TurnPolicy, TurnRunner
from bot.config import Settings, load_settings
from bot.context.budget import ProviderCapacity, RuntimeLimits
from bot.context.tokens import estimate_message_tokens
from bot.domain.ids import SessionKey
from bot.domain.messages import ChatMessage
from bot.domain.records import AssistantRecord, StoredRecord
from bot.errors import ConfigError, NotBuiltError, SessionNotFound
from bot.ports import (
    BubbleHook,
    Clock,
    ConversationStore,
    Delivery,
    LLMProvider,
    Messenger,
    SessionInfo,
)
from bot.services.chat_lock import ChatLock, LocalChatLock
from bot.services.commands import Commands
from bot.services.daily_summary import DailySummary
from bot.services.inbound import InboundPolicy, InboundService
from bot.tools import default_tools

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger("tgbot")


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def _settings(config: str | Path | None) -> Settings:
    return load_settings(config)


# ---------------------------------------------------------------------- wiring


def build_routes(settings: Settings, *, offline: LLMProvider | None = None) -> RouteTable:
    """Provider profiles from the TOML plus the `default` route from LLM_* variables
    (the offline scripted model when no LLM_BASE_URL is set)."""
    from adapters.llm.openai_provider import OpenAIProvider
    from adapters.llm.scripted import ScriptedModel

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
    from storage.engine import create_engine_for, is_sqlite, normalise_url
    from storage.locks import MIGRATION_LOCK_ID, AdvisoryChatLock
    from storage.migrate import upgrade_database
    from storage.sql import SqlStore

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
    from storage.engine import is_sqlite, normalise_url
    from storage.locks import AdvisoryChatLock

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
        events=store,
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
    from adapters.scheduler import build_scheduler

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


# ---------------------------------------------------------------------- commands


def _setup_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("TGBOT_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


async def run(config: str | None, *, webhook: bool, host: str, port: int) -> int:
    settings = _settings(config)
    if settings.bot_token is None:
        raise ConfigError("BOT_TOKEN", "required for `tgbot run` (use `tgbot demo` offline)")
    _setup_logging()
    from bot.services.polling import serve

    return await serve(settings, webhook=webhook, host=host, port=port)


async def demo(config: str | None, *, data_dir: str | None) -> int:
    settings = _settings(config)
    from bot.services.demo import run_demo

    return await run_demo(settings, data_dir=Path(data_dir) if data_dir else None)


def usage_report(
    config: str | None,
    *,
    days: int,
    since: str | None,
    as_json: bool,
    chat: int | None,
    out: TextIO | None = None,
) -> int:
    settings = _settings(config)
    from bot.services.usage_report import run_usage_report

    since_date = None
    if since is not None:
        try:
            since_date = date.fromisoformat(since)
        except ValueError:
            raise ConfigError("--since", f"expected YYYY-MM-DD, got {since!r}") from None
    return run_usage_report(
        settings.traces_dir,
        zone=settings.zone,
        today=datetime.now(UTC).astimezone(settings.zone).date(),
        days=None if since_date else days,
        since=since_date,
        as_json=as_json,
        chat=chat,
        out=out or sys.stdout,
    )


async def context_show(config: str | None, *, chat_id: int, thread_id: int) -> int:
    settings = _settings(config)
    store = await open_store(settings)
    try:
        key = SessionKey(chat_id=chat_id, thread_id=thread_id)
        print((await preview_request(settings, store, key)).text)
    finally:
        await store.close()
    return 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPreview:
    """The next request of a session: `text` is what `tgbot context show` prints."""

    session: SessionInfo
    text: str
    fixed_tokens: int
    history_tokens: int
    current_tokens: int
    records: tuple[StoredRecord, ...]
    """The window the request was projected from, oldest first."""


async def preview_request(
    settings: Settings, store: ConversationStore, key: SessionKey
) -> RequestPreview:
    """Prepare the session's next request without sending or storing anything."""
    session = await store.find_session(key)
    if session is None:
        raise SessionNotFound(
            f"no conversation stored for chat {key.chat_id} thread {key.thread_id}"
        )
    bot_id, bot_name = await _stored_bot_identity(store, session)
    app = build_app(
        settings, store=store, messenger=_NoMessenger(), bot_id=bot_id, bot_name=bot_name
    )
    try:
        state, _aliases, records = await app.runner.prepare(
            session, turn_id="preview", persist_window=False
        )
    finally:
        await app.routes.aclose()
    history, current = token_split(state.messages, state.current_index)
    return RequestPreview(
        session=state.session,
        text=render_request_preview(state.messages, state.current_index, state.fixed_tokens),
        fixed_tokens=state.fixed_tokens,
        history_tokens=history,
        current_tokens=current,
        records=tuple(records),
    )


async def _stored_bot_identity(
    store: ConversationStore, session: SessionInfo
) -> tuple[int | None, str]:
    """The bot's id and name as its last delivered reply in this chat recorded them, so the
    preview renders the system prompt and headers as the running bot does (no network)."""
    loaded = await store.load_history(session.id, max_records=200)
    for record in reversed(loaded.records):
        if isinstance(record.body, AssistantRecord) and record.message_id is not None:
            event = await store.find_event(session.key.chat_id, record.message_id)
            if event is not None and event.sender_id is not None:
                return event.sender_id, event.sender_name or "tgbot"
    return None, "tgbot"


def token_split(messages: Sequence[ChatMessage], current_index: int) -> tuple[int, int]:
    """(history, current) tokens of a request: the non-system messages before the current
    message, and the current message with what follows it."""
    history = current = 0
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if index < current_index:
            history += estimate_message_tokens(message)
        else:
            current += estimate_message_tokens(message)
    return history, current


def render_request_preview(messages: Sequence[ChatMessage], current_index: int, fixed: int) -> str:
    """Exactly what the model would be sent next, message by message, with the token split."""
    lines: list[str] = []
    for index, message in enumerate(messages):
        tokens = estimate_message_tokens(message)
        lines.append(f"--- [{index}] {message.role} ({tokens} tokens)")
        if message.content:
            lines.append(message.content)
        for call in message.tool_calls:
            lines.append(f"tool_call {call.id}: {call.name}({call.arguments})")
    history, current = token_split(messages, current_index)
    lines.append("---")
    lines.append(
        f"tokens: fixed {fixed} (system + tool schemas), history {history}, "
        f"current {current}, total {fixed + history + current}"
    )
    return "\n".join(lines)


async def import_legacy(config: str | None, file: str) -> int:
    settings = _settings(config)
    from bot.services.legacy_import import import_legacy_rows

    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()  # noqa: ASYNC240
    except OSError as exc:
        raise ConfigError("FILE", f"cannot read {file}: {exc.strerror}") from None
    store = await open_store(settings)
    try:
        report = await import_legacy_rows(store, lines)
    finally:
        await store.close()
    for error in report.errors:
        print(error, file=sys.stderr)
    print(f"imported {report.imported} rows into {report.sessions} sessions")
    return 0 if not report.errors else 1


async def db_upgrade(config: str | None) -> int:
    settings = _settings(config)
    from storage.migrate import upgrade_database

    await upgrade_database(settings.resolved_database_url)
    print("database schema is up to date")
    return 0


class _NoMessenger:
    """For `context show`, which prepares a request and never sends anything."""

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        raise NotBuiltError("context show does not send messages")

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        raise NotBuiltError("context show does not send messages")

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        raise NotBuiltError("context show does not send messages")

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        raise NotBuiltError("context show does not send messages")
