"""Spend limits on the dashboard: a bar per budget on the overview (the bot's day and month,
today's costliest chats and members), each chat's spend today against its budget in
`/chats`, and a gauge per bot-wide budget on `/metrics`; none of it without `[limits]`.

The data dir is a copy of the demo's, with spend counted into its database as the bot's
`SpendGuard` counts it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.agent.spend import periods_at
from bot.agent.spend_counters import Amount, Change, Counter
from bot.app.dashboard.server import open_dashboard
from storage.engine import create_engine_for
from storage.spend import SqlSpendCounters
from tests.test_app.test_dashboard.conftest import DemoData, serving

Client = TestClient[web.Request, web.Application]
MEMBER = 1001
LIMITS = {"daily_cost": 0.1, "monthly_tokens": 400_000, "chat_daily_cost": 0.08}


async def spent_copy(demo_data: DemoData, tmp_path: Path) -> DemoData:
    """The demo's data with 0.05 and 100,000 tokens spent today, by one member of the group."""
    data_dir = tmp_path / "data"
    shutil.copytree(demo_data.data_dir, data_dir)
    copy = DemoData(data_dir=data_dir, group_chat=demo_data.group_chat)
    periods = periods_at(datetime.now(UTC), copy.settings().zone)
    spent = Amount(50_000_000, 100_000)
    engine = create_engine_for(copy.settings().resolved_database_url)
    try:
        await SqlSpendCounters(engine).settle(
            [
                Change(counter, spent=spent)
                for counter in (
                    Counter("member", periods.day, copy.group_chat, MEMBER),
                    Counter("chat", periods.day, copy.group_chat),
                    Counter("day", periods.day),
                    Counter("month", periods.month),
                )
            ]
        )
    finally:
        await engine.dispose()
    return copy


async def test_budgets_show_as_bars_per_chat_spend_and_gauges(
    demo_data: DemoData, tmp_path: Path
) -> None:
    data = await spent_copy(demo_data, tmp_path)
    async with serving(open_dashboard(data.settings(limits=LIMITS))) as client:
        overview = await (await client.get("/")).text()
        budgets = overview.split('id="budgets"', 1)[1].split("</section>", 1)[0]
        rows = budgets.split("<tr data-budget=")[1:]
        assert len(rows) == 4  # the day, the month, the group, its member
        assert "today (" in rows[0]
        assert "50%" in rows[0]
        assert "0.0500 / 0.1000 USD" in rows[0]
        assert "25%" in rows[1]
        assert "100,000 / 400,000 tokens" in rows[1]
        assert f"chat {data.group_chat} today" in rows[2]
        assert "62%" in rows[2]  # 0.05 of the chat's 0.08
        assert f"member {MEMBER} in {data.group_chat}" in rows[3]
        assert "no limit" in rows[3]
        chats = await (await client.get("/chats")).text()
        assert "today / budget" in chats
        row = chats.split(f'<tr data-chat="{data.group_chat}">', 1)[1].split("</tr>", 1)[0]
        assert "0.0500 / 0.0800 USD" in row
        metrics = await (await client.get("/metrics")).text()
        assert 'tgbot_budget_used_ratio{budget="day"} 0.5' in metrics
        assert 'tgbot_budget_used_ratio{budget="month"} 0.25' in metrics
        assert 'tgbot_budget_spent{budget="day",unit="cost"} 0.05' in metrics
        assert 'tgbot_budget_limit{budget="month",unit="tokens"} 400000.0' in metrics


async def test_a_refused_call_is_on_the_error_list_and_in_no_call_count(
    demo_data: DemoData, tmp_path: Path
) -> None:
    data = await spent_copy(demo_data, tmp_path)
    traces = data.data_dir / "agent-traces"
    now = max(datetime.now(UTC), *(e.ts for e in read_entries(traces))) + timedelta(seconds=1)
    async with serving(open_dashboard(data.settings(limits=LIMITS))) as client:
        before = await (await client.get("/overview/figures")).json()
        LedgerWriter(traces, UTC).append(
            LedgerEntry(
                ts=now,
                session=1,
                chat=data.group_chat,
                scene="group",
                turn_id="refused",
                provider="default",
                model="offline-demo",
                error="BudgetExceeded: the daily budget of chat … is spent",
                refused="budget",
                call_id="20261204-000000000000",
            )
        )
        errors = await (await client.get("/errors")).text()
        row = errors.split('<tr data-kind="refused_budget">', 1)[1].split("</tr>", 1)[0]
        assert "refused: budget" in row
        assert "BudgetExceeded" in row
        assert "/calls/" not in row  # never sent: no trace to link
        after = await (await client.get("/overview/figures")).json()
        assert after["calls"] == before["calls"]


async def test_without_limits_nothing_of_it_shows(demo_data: DemoData, tmp_path: Path) -> None:
    data = await spent_copy(demo_data, tmp_path)
    async with serving(open_dashboard(data.settings())) as client:
        assert 'id="budgets"' not in await (await client.get("/")).text()
        assert "today / budget" not in await (await client.get("/chats")).text()
        assert "tgbot_budget_used_ratio{" not in await (await client.get("/metrics")).text()
