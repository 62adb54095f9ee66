"""The dashboard's aiohttp application: routes, the token check, errors as pages, serving.

Pages are rendered on the server with jinja2 (autoescaping on: member text is always text);
the stylesheet and the few lines of JavaScript for the live stream are served from the
package, so the dashboard works offline. Blocking reads (the ledger) run in a worker thread,
so a dashboard inside `tgbot run` never stalls the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.http_guard import GuardedSite, guarded_runner
from bot.agent.events import EventBus
from bot.agent.turn import TurnPolicy
from bot.app.dashboard import calls
from bot.app.dashboard.auth import (
    COOKIE_NAME,
    LINK_SECONDS,
    SESSION_SECONDS,
    check_bind,
    is_loopback,
    matches_secret,
    sign,
    verify,
)
from bot.app.dashboard.ledger_index import LedgerIndex
from bot.app.dashboard.live import LedgerTail, LiveChannel, LiveFeed, LiveSource, live_sources
from bot.app.dashboard.metrics import CONTENT_TYPE, DashboardMetrics
from bot.app.dashboard.views import (
    CHAT_DAYS,
    BadQuery,
    alias_lines,
    build_overview,
    chat_ledger,
    chat_spend,
    date_range,
    local,
    parse_day,
    parse_int,
    spend_days,
)
from bot.config import Settings
from bot.domain.ids import SessionKey
from bot.errors import ConfigError, SessionNotFound, StorageUnavailable
from bot.ports import ConversationStore
from bot.services.usage_render import format_cost, format_share, format_tokens
from bot.services.usage_report import Feedback

log = logging.getLogger("tgbot.dashboard")

HERE = Path(__file__).parent
HEARTBEAT_SECONDS = 15.0
CHATS_PER_PAGE = 100
WARM_DAYS = 31
"""Day files digested in the background at start, so the first overview is quick."""
STATIC_TYPES = {"style.css": "text/css", "live.js": "text/javascript"}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

Now = Callable[[], datetime]
Preview = Callable[[Settings, ConversationStore, SessionKey], Awaitable[Any]]


def _system_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Dashboard:
    """Everything the pages read, wired once per process."""

    settings: Settings
    store: ConversationStore
    engine: AsyncEngine
    index: LedgerIndex
    feed: LiveFeed
    tail: LiveSource | None
    """Follows the ledger when no event bus feeds the live events (standalone), or the other
    workers' events on PostgreSQL (`bot.app.dashboard.live.RemoteEvents`)."""
    max_records: int
    preview: Preview
    policy: TurnPolicy
    now: Now = _system_now

    def today(self) -> date:
        return self.now().astimezone(self.settings.zone).date()


DASHBOARD = web.AppKey("dashboard", Dashboard)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
STATIC: web.AppKey[dict[str, bytes]] = web.AppKey("static")


def open_dashboard(
    settings: Settings,
    *,
    bus: EventBus | None = None,
    now: Now = _system_now,
    channel: LiveChannel | None = None,
) -> Dashboard:
    """Wire the dashboard over the settings' database and data dir (read-only: it never
    migrates or writes). With `bus` (inside `tgbot run`) trims arrive as they happen."""
    from bot.app.context_show import preview_request
    from bot.app.wiring import turn_policy
    from storage.engine import create_readonly_engine
    from storage.sql import SqlStore

    engine = create_readonly_engine(settings.resolved_database_url)
    policy = turn_policy(settings)
    feed = LiveFeed(DashboardMetrics())

    def today() -> date:
        return now().astimezone(settings.zone).date()

    source = live_sources(  # the runtime and the other workers, or the ledger (standalone)
        feed,
        bus=bus,
        channel=channel,
        ledger_tail=lambda: LedgerTail(settings.traces_dir, feed, today=today),
    )

    return Dashboard(
        settings=settings,
        store=SqlStore(engine),
        engine=engine,
        index=LedgerIndex(settings.traces_dir, settings.zone, today=today),
        feed=feed,
        tail=source,
        max_records=policy.max_records,
        preview=preview_request,
        policy=policy,
        now=now,
    )


# ---------------------------------------------------------------- the application


def build_application(dashboard: Dashboard) -> web.Application:
    app = web.Application(middlewares=[_errors, _auth(dashboard)])
    app[DASHBOARD] = dashboard
    app[TEMPLATES] = _templates(dashboard)
    app[STATIC] = {name: (HERE / "static" / name).read_bytes() for name in STATIC_TYPES}
    app.router.add_get("/", overview)
    app.router.add_get("/chats", chats)
    app.router.add_get(r"/chats/{chat_id:-?\d{1,19}}", chat)
    app.router.add_get(r"/calls/{call_id:\d{8}-[0-9a-f]{12}}", call_page)
    app.router.add_get(r"/chats/{chat_id:-?\d{1,19}}/conversation", conversation_page)
    app.router.add_get("/events", events)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/static/{name}", static)
    app.on_response_prepare.append(_security_headers)
    app.cleanup_ctx.append(_background)
    app.on_shutdown.append(_end_streams)
    return app


def _templates(dashboard: Dashboard) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    zone = dashboard.settings.zone
    env.filters["tokens"] = lambda v: format_tokens(None if v is None else round(v))
    env.filters["share"] = format_share
    env.filters["cost"] = format_cost
    env.filters["num"] = lambda v: "-" if v is None else f"{v:,}"
    env.filters["local"] = lambda v: local(v, zone)
    env.globals["zone"] = dashboard.settings.bot_timezone
    return env


def render(
    request: web.Request, template: str, *, status: int = 200, **values: Any
) -> web.Response:
    env = request.app[TEMPLATES]
    page = env.get_template(template).render(path=request.path, **values)
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Errors become short pages; never a stack trace."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return render(request, "error.html", status=404, title="Not found", detail="")
    except web.HTTPException:
        raise
    except BadQuery as exc:
        return render(request, "error.html", status=400, title="Bad request", detail=str(exc))
    except SessionNotFound as exc:
        return render(request, "error.html", status=404, title="Unknown chat", detail=str(exc))
    except StorageUnavailable:
        missing = await _no_bot_data(request)
        if missing is not None:
            return render(request, "error.html", status=503, title=missing, detail="")
        log.exception("dashboard: the store did not answer")
        return render(
            request,
            "error.html",
            status=503,
            title="The database did not answer",
            detail="Try again in a moment.",
        )
    except Exception:
        log.exception("dashboard: %s failed", request.path)
        return render(
            request,
            "error.html",
            status=500,
            title="Something went wrong",
            detail="The server log has the details.",
        )


def host_name(host: str) -> str:
    """The name in a Host header, without its port (`[::1]:8080` → `::1`)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def local_path(path: str) -> str:
    """`path` as a same-site redirect target: percent-encoded (a tab, a backslash or a
    line break cannot make a browser read `//other.site`) with one leading slash."""
    return "/" + quote(path, safe="/:@!$&'()*+,;=-._~").lstrip("/")


def _auth(dashboard: Dashboard) -> Any:
    token = dashboard.settings.dashboard_token
    secret = token.get_secret_value() if token is not None else None

    behind_tls = (dashboard.settings.dashboard_url or "").lower().startswith("https://")
    used_links: dict[str, float] = {}  # a `/dashboard` link works once (until it expires)

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        # the stylesheet holds nothing private, and the refusal page needs it
        if request.path in ("/healthz", "/static/style.css"):
            return await handler(request)
        if secret is None:
            # loopback without a token: a web page on another name (DNS rebinding) must
            # not read it through the operator's browser
            if not is_loopback(host_name(request.host)):
                return web.Response(status=421, text="this dashboard answers on loopback only\n")
            return await handler(request)
        now = time.time()
        header = request.headers.get("Authorization", "")
        scheme, _, offered = header.partition(" ")
        if scheme.lower() == "bearer" and matches_secret(secret, offered.strip()):
            return await handler(request)
        cookie = request.cookies.get(COOKIE_NAME)
        if cookie is not None and verify(secret, "session", cookie, now=now):
            return await handler(request)
        query = request.query.get("token")
        for spent, expiry in list(used_links.items()):
            if expiry <= now:
                del used_links[spent]
        if query is not None and (
            matches_secret(secret, query)
            or (query not in used_links and verify(secret, "link", query, now=now))
        ):
            if not matches_secret(secret, query):
                used_links[query] = now + LINK_SECONDS
            # The token leaves the address bar: the cookie carries a signed session instead.
            kept = {k: v for k, v in request.query.items() if k != "token"}
            redirect = web.HTTPSeeOther(
                local_path(request.path) + (f"?{urlencode(kept)}" if kept else "")
            )
            redirect.set_cookie(
                COOKIE_NAME,
                sign(secret, "session", int(now) + SESSION_SECONDS),
                max_age=SESSION_SECONDS,
                httponly=True,
                samesite="Strict",
                secure=request.secure or behind_tls,
                path="/",
            )
            raise redirect
        response = render(
            request,
            "error.html",
            status=401,
            title="This dashboard needs its token",
            detail="Open the link the bot's /dashboard command sends, or add "
            "?token=<DASHBOARD_TOKEN> to the address once.",
        )
        response.headers["WWW-Authenticate"] = 'Bearer realm="tgbot dashboard"'
        return response

    return check


# ---------------------------------------------------------------- pages


def _dashboard(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD]


async def overview(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    days = date_range(
        parse_day(request.query.get("from"), "from"),
        parse_day(request.query.get("to"), "to"),
        today=dashboard.today(),
    )
    digests = await asyncio.to_thread(dashboard.index.digests, days)
    zone = dashboard.settings.zone
    reactions = await dashboard.store.reactions_between(
        datetime.combine(days[0], datetime.min.time(), zone),
        datetime.combine(days[-1] + timedelta(days=1), datetime.min.time(), zone),
    )
    feedback = Feedback()
    for reaction in reactions:
        feedback = feedback.plus(reaction.emoji)
    return render(
        request,
        "overview.html",
        title="Overview",
        overview=replace(build_overview(digests), feedback=feedback),
        today=dashboard.today(),
    )


async def chats(request: web.Request) -> web.Response:
    from storage.dashboard import chat_windows

    dashboard = _dashboard(request)
    page = parse_int(request.query.get("page"), "page", default=1)
    if page < 1:
        raise BadQuery("page: pages start at 1")
    # the caps the request builder holds each scene's window to
    policy = dashboard.policy
    budgets = dict(policy.scene_budgets)
    caps = {scene: policy.caps(scene).max_messages for scene in ("group", "private", "owner")}
    found = await chat_windows(
        dashboard.engine,
        max_records=dashboard.max_records,
        limit=CHATS_PER_PAGE,
        offset=(page - 1) * CHATS_PER_PAGE,
    )
    pages = max(1, -(-found.total // CHATS_PER_PAGE))
    if page > pages:
        raise BadQuery(f"page: there are {pages} pages")
    spend_range = spend_days(dashboard.today())
    spend = chat_spend(await asyncio.to_thread(dashboard.index.digests, spend_range))
    return render(
        request,
        "chats.html",
        title="Chats",
        chats=found.chats,
        total=found.total,
        page=page,
        pages=pages,
        budgets=budgets,
        caps=caps,
        max_messages=policy.max_messages,
        spend=spend,
        spend_days=len(spend_range),
    )


async def chat(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    chat_id = parse_int(request.match_info["chat_id"], "chat id", default=0)
    thread = parse_int(request.query.get("thread"), "thread", default=0)
    preview = await dashboard.preview(
        dashboard.settings, dashboard.store, SessionKey(chat_id=chat_id, thread_id=thread)
    )
    today = dashboard.today()
    days = [today - timedelta(days=n) for n in range(CHAT_DAYS - 1, -1, -1)]
    digests = await asyncio.to_thread(dashboard.index.digests, days)
    chat_days = [d.chats[chat_id] for d in digests if chat_id in d.chats]
    timeline, turns = chat_ledger(chat_days, session=preview.session.id)
    budget = getattr(dashboard.settings.history, f"{preview.session.scene}_tokens", 0)
    return render(
        request,
        "chat.html",
        title=f"Chat {chat_id}",
        preview=preview,
        session=preview.session,
        budget=budget,
        aliases=alias_lines(preview.records),
        timeline=timeline,
        turns=turns,
        days=CHAT_DAYS,
    )


async def call_page(request: web.Request) -> web.Response:
    settings = _dashboard(request).settings
    status, template, values = await calls.call_page(settings, request.match_info["call_id"])
    return render(request, template, status=status, **values)


async def conversation_page(request: web.Request) -> web.Response:
    status, template, values = await calls.conversation_page(_dashboard(request).store, request)
    return render(request, template, status=status, **values)


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: one `event:` per model call, trim or error, as they happen."""
    feed = _dashboard(request).feed
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    queue = feed.subscribe()
    try:
        await response.write(b"retry: 3000\n: connected\n\n")
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if event is None:
                break
            await response.write(event.sse())
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        feed.unsubscribe(queue)
    return response


async def healthz(request: web.Request) -> web.Response:
    from storage.dashboard import store_answers

    missing = await _no_bot_data(request)
    if missing is not None:
        return web.Response(text=missing + "\n", status=503)
    if await store_answers(_dashboard(request).engine):
        return web.Response(text="ok\n")
    return web.Response(text="the database does not answer\n", status=503)


async def _no_bot_data(request: web.Request) -> str | None:
    """ "no bot data in DATA_DIR=… yet" when the SQLite file is missing or was never migrated."""
    from storage.dashboard import has_bot_tables
    from storage.engine import sqlite_file

    dashboard = _dashboard(request)
    path = sqlite_file(dashboard.settings.resolved_database_url)
    if path is None:
        return None
    if not path.exists() or not await has_bot_tables(dashboard.engine):
        return f"no bot data in DATA_DIR={dashboard.settings.data_dir} yet"
    return None


async def metrics(request: web.Request) -> web.Response:
    from storage.dashboard import inbound_message_count

    dashboard = _dashboard(request)
    try:
        inbound: int | None = await inbound_message_count(dashboard.engine)
    except StorageUnavailable:
        inbound = None
    body = dashboard.feed.metrics.render(now=dashboard.now(), inbound_messages=inbound)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    files = request.app[STATIC]
    if name not in files:
        raise web.HTTPNotFound()
    return web.Response(body=files[name], content_type=STATIC_TYPES[name])


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

    async def close(self) -> None:
        await close_dashboard(self.dashboard, self.runner)


async def start_beside_bot(
    settings: Settings, bus: EventBus, channel: LiveChannel | None = None
) -> RunningDashboard | None:
    """Serve the dashboard inside `tgbot run` when DASHBOARD_PORT is set (None otherwise):
    on all interfaces when DASHBOARD_TOKEN protects it, else on loopback only."""
    if settings.dashboard_port is None:
        return None
    host = "0.0.0.0" if settings.dashboard_token is not None else "127.0.0.1"
    dashboard = open_dashboard(settings, bus=bus, channel=channel)
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
