"""The HTML pages: the overview, the chat list, one chat, one call's trace, a conversation."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

from aiohttp import web

from bot.agent.spend_counters import describe_amount
from bot.app.dashboard import calls
from bot.app.dashboard.board import (
    TEMPLATES,
    BudgetBar,
    Dashboard,
    budget_bars,
    dashboard_of,
    render,
)
from bot.app.dashboard.live import recent_events
from bot.app.dashboard.views import (
    CHAT_DAYS,
    ERROR_DAYS,
    BadQuery,
    Overview,
    alias_lines,
    build_overview,
    chat_ledger,
    chat_spend,
    date_range,
    error_lines,
    parse_day,
    parse_int,
    spend_days,
)
from bot.context.memory_block import MemoryFact
from bot.domain.ids import SessionKey
from bot.errors import StorageUnavailable
from bot.services.usage_report import Feedback

CHATS_PER_PAGE = 100


FIGURES = (
    "overview_totals.html",
    "overview_charts.html",
    "overview_days.html",
    "overview_spend.html",
)
"""The parts of the overview that follow the live feed: cards, charts, per day, spend."""


async def _overview(dashboard: Dashboard, request: web.Request) -> Overview:
    start = parse_day(request.query.get("from"), "from")
    first = None if start is not None else await asyncio.to_thread(dashboard.index.first_day)
    days = date_range(
        start,
        parse_day(request.query.get("to"), "to"),
        today=dashboard.today(),
        first_data_day=first,
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
    return replace(build_overview(digests, currency=dashboard.currency), feedback=feedback)


async def _budgets(dashboard: Dashboard) -> list[BudgetBar] | None:
    """A bar per budget, when `[limits]` sets any (None: none set, or unreadable)."""
    if dashboard.spend is None:
        return None
    status = await dashboard.spend.status(dashboard.now())
    return None if status is None else budget_bars(dashboard.spend.policy, status)


async def overview(request: web.Request) -> web.Response:
    dashboard = dashboard_of(request)
    shown = await _overview(dashboard, request)
    today = dashboard.today()
    recent = await asyncio.to_thread(
        recent_events, dashboard.settings.traces_dir, [today - timedelta(days=1), today]
    )
    return render(
        request,
        "overview.html",
        title="Overview",
        budgets=await _budgets(dashboard),
        overview=shown,
        recent=recent,
        today=dashboard.today(),
        # a range that ends today follows the live feed
        follows=shown.end == dashboard.today(),
    )


async def overview_figures(request: web.Request) -> web.Response:
    """The overview's cards, charts, per-day table and spend tables, each rendered as on
    the page (`{element id: its HTML}`): what the live feed swaps in after a model call."""
    dashboard = dashboard_of(request)
    shown = await _overview(dashboard, request)
    env = request.app[TEMPLATES]
    parts = {
        name: env.get_template(name).render(path="/", overview=shown, today=dashboard.today())
        for name in FIGURES
    }
    return web.json_response(
        {
            "calls": shown.totals.calls,
            "end": shown.end.isoformat(),
            "parts": {_root_id(html): html for html in parts.values()},
        }
    )


def _root_id(html: str) -> str:
    """The id of a part's root element (`<section … id="totals">`)."""
    head = html[html.index("<section") :]
    head = head[: head.index(">")]
    return head.split('id="', 1)[1].split('"', 1)[0]


async def chats(request: web.Request) -> web.Response:
    from storage.dashboard import chat_windows

    dashboard = dashboard_of(request)
    page = parse_int(request.query.get("page"), "page", default=1)
    if page < 1:
        raise BadQuery("page: pages start at 1")
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
    today: dict[int, str] = {}
    if dashboard.spend is not None:  # each chat's spend today against its daily budget
        board = dashboard.spend
        ids = sorted({c.key.chat_id for c in found.chats})
        for chat_id, used in (await board.chats_today(ids, dashboard.now())).items():
            scene = next(c.scene for c in found.chats if c.key.chat_id == chat_id)
            limit = board.policy.for_chat(chat_id, scene).chat
            today[chat_id] = describe_amount(used, limit, board.policy.currency)
    return render(
        request,
        "chats.html",
        title="Chats",
        chats=found.chats,
        total=found.total,
        page=page,
        pages=pages,
        window=dashboard.window,
        spend=spend,
        spend_days=len(spend_range),
        budget_today=today if dashboard.spend is not None else None,
    )


async def chat(request: web.Request) -> web.Response:
    dashboard = dashboard_of(request)
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
    budget = dashboard.window.history_budgets.of(preview.session.scene)
    said = await asyncio.to_thread(calls.turn_texts, dashboard.settings.traces_dir, turns)
    recent = await asyncio.to_thread(
        recent_events,
        dashboard.settings.traces_dir,
        [today - timedelta(days=1), today],
        session=preview.session.id,
    )
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
        said=said,
        days=CHAT_DAYS,
        recent=recent,
        facts=await chat_facts(dashboard, chat_id),
    )


MAX_FACTS_SHOWN = 500


async def chat_facts(dashboard: Dashboard, chat_id: int) -> tuple[MemoryFact, ...] | None:
    """The facts the model keeps in this chat, newest first; None when they cannot be read
    (a database from before memory facts)."""
    if dashboard.memory is None:
        return None
    try:
        return await dashboard.memory.list_facts(chat_id=chat_id, limit=MAX_FACTS_SHOWN)
    except StorageUnavailable:
        return None


async def call_page(request: web.Request) -> web.Response:
    settings = dashboard_of(request).settings
    status, template, values = await calls.call_page(settings, request.match_info["call_id"])
    return render(request, template, status=status, **values)


async def conversation_page(request: web.Request) -> web.Response:
    status, template, values = await calls.conversation_page(dashboard_of(request).store, request)
    return render(request, template, status=status, **values)


async def ambient_page(request: web.Request) -> web.Response:
    """Ambient mode's decisions, newest first, each with the gate or the judge that made it."""
    from bot.services.ambient import read_decisions

    directory = dashboard_of(request).settings.data_dir / "ambient"
    found = await asyncio.to_thread(read_decisions, directory)
    return render(request, "ambient.html", title="Ambient", decisions=found)


async def errors_page(request: web.Request) -> web.Response:
    """Failed model calls, refused sends and skipped updates, newest first."""
    from bot.services.error_log import read_errors

    dashboard = dashboard_of(request)
    start = parse_day(request.query.get("from"), "from")
    end = parse_day(request.query.get("to"), "to")
    if start is None:
        start = (end or dashboard.today()) - timedelta(days=ERROR_DAYS - 1)
        first = await asyncio.to_thread(dashboard.index.first_day)
        if first is not None and start < first <= (end or dashboard.today()):
            start = first
    days = date_range(start, end, today=dashboard.today())
    digests = await asyncio.to_thread(dashboard.index.digests, days)
    traces = dashboard.settings.traces_dir
    logged = await asyncio.to_thread(lambda: list(read_errors(traces, days)))
    lines, left_out = error_lines(digests, logged)
    return render(
        request,
        "errors.html",
        title="Errors",
        errors=lines,
        left_out=left_out,
        start=days[0],
        end=days[-1],
    )
