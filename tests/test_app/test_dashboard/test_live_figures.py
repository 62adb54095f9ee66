"""The overview follows the live feed: `/overview/figures` renders its cards, charts and
tables again (as the page does), so the browser swaps them in after a model call; and the
default range starts at the first day with data."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter, ledger_file
from bot.app.dashboard.server import open_dashboard
from bot.app.dashboard.views import DEFAULT_DAYS
from tests.test_app.test_dashboard.conftest import DemoData, serving

Client = TestClient[web.Request, web.Application]


@pytest.fixture
def data(demo_data: DemoData, tmp_path: Path) -> DemoData:
    target = tmp_path / "data"
    shutil.copytree(demo_data.data_dir, target)
    return DemoData(data_dir=target, group_chat=demo_data.group_chat)


@pytest.fixture
async def client(data: DemoData) -> AsyncIterator[Client]:
    async with serving(open_dashboard(data.settings())) as test_client:
        yield test_client


def live_call(data: DemoData, **fields: object) -> LedgerEntry:
    base: dict[str, object] = {
        "ts": datetime.now(UTC),
        "session": 1,
        "chat": data.group_chat,
        "scene": "group",
        "turn_id": "live-turn",
        "provider": "default",
        "model": "live-model",
        "input_tokens": 5000,
        "cached_tokens": 4000,
        "output_tokens": 10,
    }
    base.update(fields)
    return LedgerEntry(**base)  # type: ignore[arg-type]


def total(html: str, name: str) -> str:
    found = re.search(rf'data-total="{name}"[^>]*>([^<]*)<', html)
    assert found is not None, name
    return found.group(1)


async def test_the_figures_are_the_pages_own_parts_and_follow_the_ledger(
    client: Client, data: DemoData
) -> None:
    page = await (await client.get("/")).text()
    figures_url = re.search(r'data-figures="([^"]+)"', page)
    assert figures_url is not None, "a range that ends today follows the live feed"
    url = figures_url.group(1).replace("&amp;", "&")
    before = await (await client.get(url)).json()
    assert set(before["parts"]) == {"totals", "charts", "per-day", "spend"}
    # each part is exactly what the page shows
    for html in before["parts"].values():
        assert html.strip() in page
    calls = before["calls"]

    LedgerWriter(data.data_dir / "agent-traces", UTC).append(live_call(data))
    after = await (await client.get(url)).json()
    assert after["calls"] == calls + 1
    assert total(after["parts"]["totals"], "calls") == f"{calls + 1:,}"
    assert "live-model" in after["parts"]["spend"]
    today = datetime.now(UTC).date()
    assert f"{today:%m-%d}: " in after["parts"]["charts"]


async def test_a_past_range_does_not_follow(client: Client) -> None:
    page = await (await client.get("/?from=2026-01-01&to=2026-01-03")).text()
    assert "data-figures" not in page


async def test_the_default_range_starts_at_the_first_day_with_data(
    client: Client, data: DemoData
) -> None:
    traces = data.data_dir / "agent-traces"
    today = datetime.now(UTC).date()
    days = sorted(date.fromisoformat(p.stem) for p in traces.glob("????-??-??.jsonl"))
    page = await (await client.get("/")).text()
    first = max(days[0], today - timedelta(days=DEFAULT_DAYS - 1))
    assert f"Usage {first.isoformat()} → {today.isoformat()}" in page
    # a call three days back: the range now starts there, not 14 days back
    earlier = today - timedelta(days=3)
    assert earlier < first  # the demo's calls are from today (and maybe yesterday)
    LedgerWriter(traces, UTC).append(live_call(data, ts=datetime.now(UTC) - timedelta(days=3)))
    assert ledger_file(traces, earlier).exists()
    first = earlier
    page = await (await client.get("/")).text()
    assert f"Usage {first.isoformat()} → {today.isoformat()}" in page
    assert f'data-day="{(first - timedelta(days=1)).isoformat()}"' not in page
