"""Start-up and shutdown of `tgbot run` (`bot.app.serve`): logging, the stop signals, the
app and what runs beside the updates, each entered on the serving exit stack.

What `serve` does once, before the first update (`open_app`, then `start_serving`) and after
the last: the store, the Bot, the MCP servers and the app over them, the daily summary, the
live events, the dashboard, the retention loop, the scheduled jobs, the crash recovery, the
start banner; on the way out, the running turns finish within their grace. None of it runs
while a message is answered.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapters.llm.provider_defaults import kind_for
from adapters.systemd_notify import systemd_notifier
from adapters.telegram.bot_session import TelegramBot, build_bot
from adapters.telegram.sender import TelegramMessenger
from adapters.telegram.update_health import UpdateHealth
from bot.app.heap import settle_heap
from bot.app.jobs import start_jobs, task_turns
from bot.app.mcp_servers import start_mcp
from bot.app.policies import pace_limits, retention_policy
from bot.app.preflight import describe_telegram_failure, mask_url, opening_database
from bot.app.private_chats import private_chats_said
from bot.app.recovery_loop import start_orphan_scan
from bot.app.retention_loop import retention_loop
from bot.app.topology import Topology, topology_for
from bot.app.wiring import App, build_app, open_store, start_daily_summary
from bot.config import Settings
from bot.ports import ChatLock, Messenger
from bot.redact import install_log_scrubbing
from bot.services.error_log import ErrorLog
from bot.services.inbound_rules import BotIdentity
from bot.store_ports import ConversationStore
from bot.texts import text as user_text

if TYPE_CHECKING:
    from adapters.otel import OtelTracer
    from storage.postgres.live_channel import PgLiveChannel

log = logging.getLogger("tgbot.run")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenedApp:
    """What `open_app` opened, each part released by the serving exit stack."""

    bot: TelegramBot
    app: App
    live: PgLiveChannel | None
    bot_id: int
    identity: BotIdentity


async def open_app(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    token: str,
    url: str,
    tracing: OtelTracer | None,
) -> OpenedApp:
    """The store, the chat lock, the Bot, the live channel (several workers) and the app over
    them, each pushed on `stack` to be released in reverse order."""
    api_base = settings.telegram_api_base
    async with opening_database(url):
        store = await open_store(settings, serving=True)
    stack.push_async_callback(store.close)
    topology = topology_for(store)  # one process, or several workers
    chat_lock = topology.chat_lock()
    stack.push_async_callback(chat_lock.aclose)
    with _telegram_failures(api_base):
        bot = build_bot(token, api_base)
    stack.push_async_callback(bot.session.close)
    live = topology.live_channel()  # several workers: each one's live events
    if live is not None:
        stack.push_async_callback(live.aclose)
    with _telegram_failures(api_base):
        me = await bot.get_me()
    app = await _start_app(
        stack,
        settings,
        store=store,
        topology=topology,
        # every send, typing and reaction is paced (`[telegram]` limits)
        sender=TelegramMessenger(
            bot,
            cut_note=user_text(settings.fallback_locale, "reply_cut", count="{count}"),
            pacer=topology.send_pacer(pace_limits(settings)),
        ),
        bot_id=me.id,
        bot_name=me.first_name or me.username or "tgbot",
        chat_lock=chat_lock,
        tracing=tracing,
    )
    identity = BotIdentity(id=me.id, username=me.username)
    return OpenedApp(bot=bot, app=app, live=live, bot_id=me.id, identity=identity)


async def start_serving(
    stack: AsyncExitStack, opened: OpenedApp, *, webhook: bool, host: str, port: int
) -> UpdateHealth:
    """The update health for the opened app, what runs beside the updates, the crash
    recovery, and the start lines of the log: the last steps before updates."""
    app, identity = opened.app, opened.identity
    settings = app.settings
    # never silently deaf: /healthz and the systemd watchdog read this
    health = UpdateHealth(
        stall_seconds=settings.telegram.updates_stall_seconds,
        source="getWebhookInfo" if webhook else "getUpdates",
        notify=systemd_notifier(),
    )
    await _start_beside(stack, app, opened.live, health)
    await _recover(stack, app, identity)
    log.info("start-up objects frozen out of garbage collection: %d", settle_heap())
    log.info(
        "%s",
        start_banner(settings, username=identity.username, webhook=webhook, host=host, port=port),
    )
    log.info("private chats: %s", private_chats_said(settings))
    return health


def start_banner(
    settings: Settings, *, username: str | None, webhook: bool, host: str, port: int
) -> str:
    """The one line `tgbot run` logs once it is up: who, how, which model, where the data
    goes, and the dashboard."""
    mode = f"webhook on {host}:{port}" if webhook else f"polling {settings.telegram_api_base}"
    profile = settings.providers.get(settings.default_provider or "")
    if profile is not None:
        name = f"{settings.default_provider}:{profile.model or settings.llm_model}"
        model = f"model {name} at {profile.base_url}"
        model += _inferred_kind(profile.base_url, profile.kind, "kind")
    elif settings.llm_base_url:
        model = f"model default:{settings.llm_model} at {settings.llm_base_url}"
        model += _inferred_kind(settings.llm_base_url, settings.llm_kind, "LLM_KIND")
    else:
        model = "the offline model: replies are canned"
    if settings.dashboard_port is None:
        dashboard = "dashboard off (DASHBOARD_PORT unset)"
    else:
        bind = "0.0.0.0" if settings.dashboard_token is not None else "127.0.0.1"
        dashboard = (
            f"dashboard {settings.dashboard_url or f'http://{bind}:{settings.dashboard_port}/'}"
        )
    return (
        f"bot @{username} started; {mode}; {model}; database "
        f"{mask_url(settings.resolved_database_url)}; DATA_DIR={settings.data_dir}; {dashboard}"
    )


def _inferred_kind(base_url: str, kind: str | None, setting: str) -> str:
    """What the banner adds when the Messages API was chosen from the URL alone."""
    if kind is None and kind_for(base_url) == "anthropic":
        return f" (Anthropic Messages API, inferred from the URL; {setting} overrides)"
    return ""


class StopSignals:
    """SIGTERM and SIGINT from the first step of `serve`: during start-up a signal cancels
    it (what was opened so far closes, in reverse order); once serving it sets `stop` (no
    new updates; the running turns finish). A second signal never cuts a close short. Only
    the main thread receives signals: served from another (a test runs the CLI in a thread),
    there are none to handle."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.cut_start_short = False
        self._starting = asyncio.current_task()
        self._signals = (
            _STOP_SIGNALS if threading.current_thread() is threading.main_thread() else ()
        )

    def __enter__(self) -> StopSignals:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.add_signal_handler(sig, self._received)
        return self

    def __exit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)

    def started(self) -> None:
        self._starting = None

    def _received(self) -> None:
        self.stop.set()
        if self._starting is not None:
            self._starting.cancel()
            self._starting = None
            self.cut_start_short = True


def uncancel() -> None:
    """The start-up a stop signal cancelled has closed: the process stops normally."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


@contextmanager
def _telegram_failures(api_base: str) -> Iterator[None]:
    """A Bot API that refuses the token or cannot be reached: one clear line."""
    try:
        yield
    except Exception as exc:
        failure = describe_telegram_failure(exc, api_base)
        if failure is None:
            raise
        raise failure from None


async def _start_app(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    store: ConversationStore,
    topology: Topology,
    sender: Messenger,
    bot_id: int,
    bot_name: str,
    chat_lock: ChatLock,
    tracing: OtelTracer | None,
) -> App:
    """The MCP servers (their processes end with the bot) and the app over them."""
    mcp = await start_mcp(settings)  # None without [[mcp.servers]]: no SDK import
    if mcp is not None:
        stack.push_async_callback(mcp.aclose)
    app = build_app(
        settings,
        store=store,
        messenger=sender,
        bot_id=bot_id,
        bot_name=bot_name,
        chat_lock=chat_lock,
        tracing=tracing,
        extra_tools=mcp.tools if mcp is not None else (),
        topology=topology,
    )
    stack.push_async_callback(app.ledger.aclose)
    if app.traces is not None:  # after the turns: their held traces are written
        stack.push_async_callback(app.traces.aclose)
    stack.push_async_callback(app.routes.aclose)
    stack.push_async_callback(app.runner.aclose)
    if mcp is not None:
        tools = app.runner.tools
        _stopped_with(stack, lambda stop: asyncio.create_task(mcp.watch_reloads(tools, stop)))
    return app


async def _start_beside(
    stack: AsyncExitStack, app: App, live: PgLiveChannel | None, health: UpdateHealth
) -> None:
    """What runs beside the updates: the daily summary, the live events, the dashboard and
    the retention loop; the corrections every worker has learned are adopted first."""
    settings = app.settings
    scheduler = start_daily_summary(app)
    if scheduler is not None:
        stack.callback(scheduler.shutdown, wait=False)
    if live is not None:
        from bot.app.dashboard.live import LivePublisher

        LivePublisher(live).attach(app.bus)
    await app.runner.truth.load_shared()
    if settings.dashboard_port is not None:
        # Deferred: most runs serve no dashboard, and importing it (jinja2,
        # prometheus-client, its views) costs ~7 MB resident and ~0.1-0.3 s of start-up.
        from bot.app.dashboard.server import start_beside_bot

        dashboard = await start_beside_bot(settings, app.bus, live, updates=health)
        if dashboard is not None:
            stack.push_async_callback(dashboard.aclose)
    _start_jobs(stack, app)
    policy = retention_policy(settings)
    clock = app.runner.clock
    _stopped_with(
        stack,
        lambda stop: asyncio.create_task(retention_loop(app.store, policy, clock, stop=stop)),
    )


def _start_jobs(stack: AsyncExitStack, app: App) -> None:
    """Scheduled jobs: due runs claimed and delivered beside the updates (`bot.app.jobs`)."""
    book = app.jobs
    if book is None:
        return

    def start(stop: asyncio.Event) -> asyncio.Task[None]:
        runner, task = start_jobs(
            book.store,
            book.policy,
            app.runner.clock,
            messenger=app.messenger,
            notices=app.outside,
            conversations=app.store,
            turn_lock=app.inbound.turns.turn_lock,
            bot_id=app.runner.tool_runner.bot_id,
            bot_name=app.runner.tool_runner.bot_name,
            locales=app.locales,
            fallback_locale=app.settings.fallback_locale,
            task_turn=task_turns(app.runner),
            stop=stop,
        )
        book.on_scheduled = runner.nudge
        return task

    _stopped_with(stack, start)


def _stopped_with(
    stack: AsyncExitStack, start: Callable[[asyncio.Event], asyncio.Task[None] | None]
) -> None:
    """Start a loop that runs until its stop event (`start` may decline: None); the stack
    sets the event and waits for the loop when it closes."""
    stop = asyncio.Event()
    task = start(stop)
    if task is None:
        return

    async def close() -> None:
        stop.set()
        await task

    stack.push_async_callback(close)


async def _recover(stack: AsyncExitStack, app: App, identity: BotIdentity) -> None:
    """Before the first update, finish or close the turns a crash interrupted; with several
    workers, keep scanning for the turns a killed one left (`bot.app.recovery_loop`). The
    turns started here finish on every way out (`_finish_turns`)."""
    stack.push_async_callback(_finish_turns, app)
    await app.recovery.recover(identity)
    _stopped_with(stack, lambda stop: start_orphan_scan(app, identity, stop=stop))


async def _finish_turns(app: App) -> None:
    """Let the running turns finish within `shutdown_grace_seconds`, then cancel the rest."""
    log.info("finishing running turns")
    grace = app.settings.runtime.shutdown_grace_seconds
    try:
        async with asyncio.timeout(grace):
            await app.inbound.drain()
    except TimeoutError:
        log.warning("turns still running after %gs; cancelling them", grace)
        app.inbound.cancel_running()
        await app.inbound.drain()


def webhook_secret(settings: Settings) -> str | None:
    secret = settings.webhook_secret
    return secret.get_secret_value() if secret is not None else None


def skipped_updates(app: App) -> Callable[[int, str], Awaitable[None]]:
    """An update that does not validate: recorded in the update log (`claim_update`) and
    on the dashboard's error list, then passed."""
    skipped_log = ErrorLog(app.settings.traces_dir, app.settings.zone)

    async def skipped(update_id: int, reason: str) -> None:
        skipped_log.skipped_update(update_id, reason)
        await app.store.claim_update(update_id)

    return skipped


def setup_logging(level: str) -> None:
    """Log to stderr at `level` (`TGBOT_LOG_LEVEL`); secrets scrubbed from every record and
    the HTTP clients' header dumps silenced (`bot.redact`)."""
    install_log_scrubbing()
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # alembic says at INFO every plugin it loads and every migration it runs: start-up noise
    # (`tgbot db upgrade` reports what it did itself); its warnings still show
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))
