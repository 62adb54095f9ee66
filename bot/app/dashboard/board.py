"""The dashboard's state, wired once per process, and how a page is rendered.

`Dashboard` holds everything the pages read (settings, the read-only store and engine, the
ledger index, the live feed); `render` turns a template and its values into a response
(jinja2 with autoescaping on: member text is always text).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.telegram.update_health import UpdateHealth
from bot.agent.events import EventBus
from bot.agent.spend import SpendPolicy, SpendStatus, periods_at, spend_status
from bot.agent.spend_counters import NANOS, Amount, Counter, Limit, SpendCounters, describe_amount
from bot.agent.window_state import WindowPolicy
from bot.app.dashboard.ledger_index import LedgerIndex
from bot.app.dashboard.live import LedgerTail, LiveChannel, LiveFeed, LiveSource, live_sources
from bot.app.dashboard.metrics import BudgetGauge, DashboardMetrics
from bot.app.dashboard.views import local
from bot.config import Settings
from bot.domain.ids import Scene, SessionKey
from bot.errors import StorageUnavailable
from bot.services.usage_render import format_cost, format_share, format_tokens
from bot.store_ports import ConversationStore, MemoryFacts
from bot.tools.mcp import server_of

HERE = Path(__file__).parent

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
    window: WindowPolicy
    """What the request builder holds each scene's window to (budgets, caps)."""
    now: Now = _system_now
    spend: SpendBoard | None = None
    """The spend limits and their counters (None: no `[limits]` set)."""
    updates: UpdateHealth | None = None
    """Whether the bot still reads its updates (None: a dashboard outside `tgbot run`)."""
    memory: MemoryFacts | None = None
    """The facts the model keeps (`remember`), listed per chat on its page."""

    def today(self) -> date:
        return self.now().astimezone(self.settings.zone).date()

    @property
    def currency(self) -> str:
        return self.settings.ledger.currency


@dataclass(frozen=True, slots=True)
class SpendBoard:
    """What the budgets' bars and gauges read: the limits and the shared counters."""

    policy: SpendPolicy
    counters: SpendCounters

    async def status(self, now: datetime) -> SpendStatus | None:
        """The budgets now; None when the counters cannot be read."""
        try:
            return await spend_status(self.policy, self.counters, now)
        except (StorageUnavailable, SQLAlchemyError):
            return None

    async def chats_today(self, chat_ids: list[int], now: datetime) -> dict[int, Amount]:
        """Each chat's spend today (the chat's daily budget)."""
        day = periods_at(now, self.policy.zone).day
        try:
            totals = await self.counters.totals([Counter("chat", day, c) for c in chat_ids])
        except (StorageUnavailable, SQLAlchemyError):
            return {}
        return {c.chat_id: a for c, a in totals.items()}


@dataclass(frozen=True, slots=True)
class BudgetBar:
    """One budget on the overview: its name, how much of it is used, and the figures."""

    name: str
    share: float | None
    """Of the limit (1.0 = reached); None without a limit."""
    figures: str
    resets: str


def budget_bars(policy: SpendPolicy, status: SpendStatus) -> list[BudgetBar]:
    """The bot's day and month, then today's costliest chats and members against theirs."""
    zone = policy.zone_name
    periods = status.periods
    midnight = f"00:00 {zone}"

    def bar(name: str, used: Amount, limit: Limit, resets: str) -> BudgetBar:
        return BudgetBar(
            name=name,
            share=limit.share(used) if limit.set else None,
            figures=describe_amount(used, limit, policy.currency),
            resets=resets,
        )

    def scene_of(chat_id: int) -> Scene:
        if chat_id < 0:
            return "group"
        return "owner" if chat_id == policy.owner_id else "private"

    bars = [
        bar(f"today ({periods.day})", status.day, policy.daily, midnight),
        bar(
            f"this month ({periods.month})",
            status.month,
            policy.monthly,
            periods.month_ends.date().isoformat(),
        ),
    ]
    for counter, used in status.chats:
        limit = policy.for_chat(counter.chat_id, scene_of(counter.chat_id)).chat
        bars.append(bar(f"chat {counter.chat_id} today", used, limit, midnight))
    for counter, used in status.members:
        limit = policy.for_chat(counter.chat_id, scene_of(counter.chat_id)).member
        name = f"member {counter.user_id} in {counter.chat_id} today"
        bars.append(bar(name, used, limit, midnight))
    return bars


def budget_gauges(policy: SpendPolicy, status: SpendStatus) -> list[BudgetGauge]:
    """The bot's day and month budgets for `/metrics`."""
    return [
        BudgetGauge(
            budget=name,
            spent_cost=used.money,
            spent_tokens=used.tokens,
            limit_cost=limit.cost / NANOS,
            limit_tokens=limit.tokens,
            used=limit.share(used) if limit.set else None,
        )
        for name, used, limit in (
            ("day", status.day, policy.daily),
            ("month", status.month, policy.monthly),
        )
    ]


DASHBOARD = web.AppKey("dashboard", Dashboard)
TEMPLATES = web.AppKey("templates", jinja2.Environment)


def open_dashboard(
    settings: Settings,
    *,
    bus: EventBus | None = None,
    now: Now = _system_now,
    channel: LiveChannel | None = None,
) -> Dashboard:
    """Wire the dashboard over the settings' database and data dir (read-only: it never
    migrates or writes). With `bus` (inside `tgbot run`) trims arrive as they happen, and
    with `channel` (PostgreSQL) the other workers' live events too."""
    from bot.app.context_show import preview_request
    from bot.app.policies import spend_policy, window_policy
    from storage.engine import create_readonly_engine
    from storage.memory_facts import SqlMemoryFacts
    from storage.spend import SqlSpendCounters
    from storage.sql import SqlStore

    engine = create_readonly_engine(settings.resolved_database_url)
    window = window_policy(settings)
    feed = LiveFeed(DashboardMetrics())

    def today() -> date:
        return now().astimezone(settings.zone).date()

    source = live_sources(  # the runtime and the other workers, or the ledger (standalone)
        feed,
        bus=bus,
        channel=channel,
        ledger_tail=lambda: LedgerTail(settings.traces_dir, feed, today=today),
    )

    limits = spend_policy(settings)
    return Dashboard(
        spend=SpendBoard(limits, SqlSpendCounters(engine)) if limits.active else None,
        memory=SqlMemoryFacts(engine),
        settings=settings,
        store=SqlStore(engine),
        engine=engine,
        index=LedgerIndex(settings.traces_dir, settings.zone, today=today),
        feed=feed,
        tail=source,
        max_records=window.max_records,
        preview=preview_request,
        window=window,
        now=now,
    )


def dashboard_of(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD]


def templates(dashboard: Dashboard) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    zone = dashboard.settings.zone
    currency = dashboard.currency
    env.filters["tokens"] = lambda v: format_tokens(None if v is None else round(v))
    env.filters["share"] = format_share
    env.filters["cost"] = lambda v: format_cost(v, currency)
    env.filters["num"] = lambda v: "-" if v is None else f"{v:,}"
    env.filters["local"] = lambda v: local(v, zone)
    env.filters["mcp_server"] = lambda name: server_of(str(name or ""))
    env.globals["zone"] = dashboard.settings.bot_timezone
    env.globals["currency"] = currency
    return env


def render(
    request: web.Request, template: str, *, status: int = 200, **values: Any
) -> web.Response:
    env = request.app[TEMPLATES]
    page = env.get_template(template).render(path=request.path, **values)
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


async def no_bot_data(request: web.Request) -> str | None:
    """ "no bot data in DATA_DIR=… yet" when the SQLite file is missing or was never migrated."""
    from storage.dashboard import has_bot_tables
    from storage.engine import sqlite_file

    dashboard = dashboard_of(request)
    path = sqlite_file(dashboard.settings.resolved_database_url)
    if path is None:
        return None
    if not path.exists() or not await has_bot_tables(dashboard.engine):
        return f"no bot data in DATA_DIR={dashboard.settings.data_dir} yet"
    return None
