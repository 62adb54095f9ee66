"""The dashboard's aiohttp application: its routes, its background work, and serving it.

The pages (`pages`), the machine-facing routes (`feeds`) and what guards them all (`guard`)
live beside this module; `board` holds the state they read. Blocking reads (the ledger) run
in a worker thread, so a dashboard inside `tgbot run` never stalls the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from adapters.http_guard import GuardedSite, guarded_runner
from adapters.telegram.update_health import UpdateHealth
from bot.agent.events import EventBus
from bot.app.dashboard import feeds, jobs_page, pages
from bot.app.dashboard.auth import check_bind
from bot.app.dashboard.board import DASHBOARD, TEMPLATES, Dashboard, open_dashboard, templates
from bot.app.dashboard.guard import errors_as_pages, security_headers, token_check
from bot.app.dashboard.ledger_index import LedgerIndex
from bot.app.dashboard.live import LiveChannel
from bot.config import Settings
from bot.errors import ConfigError

__all__ = [
    "Dashboard",
    "RunningDashboard",
    "build_application",
    "close_dashboard",
    "open_dashboard",
    "run_dashboard",
    "serve_dashboard",
    "start_beside_bot",
    "start_dashboard",
]

log = logging.getLogger("tgbot.dashboard")

WARM_DAYS = 31
"""Day files digested in the background at start, so the first overview is quick."""


def build_application(dashboard: Dashboard) -> web.Application:
    app = web.Application(middlewares=[errors_as_pages, token_check(dashboard)])
    app[DASHBOARD] = dashboard
    app[TEMPLATES] = templates(dashboard)
    app[feeds.STATIC] = feeds.static_files()
    app.router.add_get("/", pages.overview)
    app.router.add_get("/overview/figures", pages.overview_figures)
    app.router.add_get("/chats", pages.chats)
    app.router.add_get(r"/chats/{chat_id:-?\d{1,19}}", pages.chat)
    app.router.add_get(r"/calls/{call_id:\d{8}-[0-9a-f]{12}}", pages.call_page)
    app.router.add_get(r"/chats/{chat_id:-?\d{1,19}}/conversation", pages.conversation_page)
    app.router.add_get("/errors", pages.errors_page)
    app.router.add_get("/jobs", jobs_page.jobs_page)
    app.router.add_get("/ambient", pages.ambient_page)
    app.router.add_get("/events", feeds.events)
    app.router.add_get("/healthz", feeds.healthz)
    app.router.add_get("/metrics", feeds.metrics)
    app.router.add_get("/static/{name}", feeds.static)
    app.on_response_prepare.append(security_headers)
    app.cleanup_ctx.append(_background)
    app.on_shutdown.append(_end_streams)
    return app


async def _end_streams(app: web.Application) -> None:
    app[DASHBOARD].feed.close()


async def _background(app: web.Application) -> AsyncIterator[None]:
    """The ledger tail for the live feed, and the warm-up of the day digests."""
    dashboard = app[DASHBOARD]
    tail = None
    if dashboard.tail is not None:
        dashboard.tail.start_at_end()
        tail = asyncio.create_task(dashboard.tail.run())
    warm = asyncio.create_task(asyncio.to_thread(_warm, dashboard.index))
    yield
    if tail is not None:
        tail.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tail
    await warm


def _warm(index: LedgerIndex) -> None:
    try:
        index.warm(WARM_DAYS)
    except OSError:
        log.exception("could not read the ledger ahead of the first page")


# ---------------------------------------------------------------- serving


async def start_dashboard(dashboard: Dashboard, *, host: str, port: int) -> web.AppRunner:
    """Start serving (returns the runner to clean up); refuses an open host without a token."""
    check_bind(host, has_token=dashboard.settings.dashboard_token is not None)
    runner = guarded_runner(build_application(dashboard), shutdown_timeout=5)
    await runner.setup()
    site = GuardedSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(
            "DASHBOARD_PORT", f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    return runner


async def close_dashboard(dashboard: Dashboard, runner: web.AppRunner | None) -> None:
    if runner is not None:
        await runner.cleanup()
    await dashboard.store.close()


@dataclass(slots=True)
class RunningDashboard:
    """The dashboard served beside the bot by `tgbot run`."""

    dashboard: Dashboard
    runner: web.AppRunner

    async def aclose(self) -> None:
        await close_dashboard(self.dashboard, self.runner)


async def start_beside_bot(
    settings: Settings,
    bus: EventBus,
    channel: LiveChannel | None = None,
    *,
    updates: UpdateHealth | None = None,
) -> RunningDashboard | None:
    """Serve the dashboard inside `tgbot run` when DASHBOARD_PORT is set (None otherwise):
    on all interfaces when DASHBOARD_TOKEN protects it, else on loopback only."""
    if settings.dashboard_port is None:
        return None
    host = "0.0.0.0" if settings.dashboard_token is not None else "127.0.0.1"
    dashboard = open_dashboard(settings, bus=bus, channel=channel)
    dashboard.updates = updates
    try:
        runner = await start_dashboard(dashboard, host=host, port=settings.dashboard_port)
    except BaseException:
        await close_dashboard(dashboard, None)
        raise
    log.info("dashboard on http://%s:%d/", host, settings.dashboard_port)
    return RunningDashboard(dashboard, runner)


async def serve_dashboard(settings: Settings, *, host: str, port: int) -> int:
    """`tgbot dashboard`: serve until interrupted."""
    check_bind(host, has_token=settings.dashboard_token is not None)
    dashboard = open_dashboard(settings)
    runner = None
    try:
        runner = await start_dashboard(dashboard, host=host, port=port)
        shown = f"[{host}]" if ":" in host else host
        print(f"dashboard on http://{shown}:{port}/ (Ctrl+C to stop)", flush=True)
        await asyncio.Event().wait()
    finally:
        await close_dashboard(dashboard, runner)
    return 0


async def run_dashboard(config: str | None, *, host: str, port: int | None) -> int:
    """`tgbot dashboard [--host H] [--port P]` over DATABASE_URL and DATA_DIR."""
    from bot.config import load_settings

    settings = load_settings(config)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return await serve_dashboard(settings, host=host, port=port or settings.dashboard_port or 8080)
