"""The dashboard's pages over a `tgbot demo` data dir, through HTTP (aiohttp's test client)."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.app.dashboard.server import Dashboard
from tests.test_app.test_dashboard.conftest import (
    HOSTILE_NAME,
    HOSTILE_TEXT,
    DemoData,
    run_tgbot,
)

Client = TestClient[web.Request, web.Application]
ROW = re.compile(r'<tr data-day="([0-9-]+)"[^>]*>(.*?)</tr>', re.DOTALL)
FIELD = re.compile(r'data-field="(\w+)"(?: data-value="([^"]*)")?>([^<]*)</td>')
PREVIEW = re.compile(r'<pre class="preview" id="preview">(.*?)</pre>', re.DOTALL)
CLOCK_LINE = re.compile(r"^time: .*$", re.MULTILINE)


def overview_rows(page: str) -> dict[str, dict[str, str]]:
    """{day: {field: data-value, or the shown text}} from the per-day table."""
    rows = {}
    for day, cells in ROW.findall(page):
        rows[day] = {name: value or text for name, value, text in FIELD.findall(cells)}
    return rows


def report_json(demo: DemoData, days: int) -> dict[str, Any]:
    """What `tgbot usage report --days N --json` prints."""
    done = run_tgbot("usage", "report", "--days", str(days), "--json", env=demo.env())
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.mark.slow
async def test_overview_shows_the_numbers_of_the_usage_report(
    client: Client, demo_data: DemoData
) -> None:
    response = await client.get("/")
    assert response.status == 200
    page = await response.text()
    report = report_json(demo_data, 14)
    rows = overview_rows(page)
    days = report["days"]
    assert isinstance(days, list)
    assert len(days) == 14
    busy = [day for day in days if day["calls"]]
    assert busy, "the demo made model calls today"
    # the default range starts at the first day with data, not 14 days back
    shown = [day for day in days if day["day"] >= busy[0]["day"]]
    assert set(rows) == {day["day"] for day in shown}
    for day in shown:
        row = rows[day["day"]]
        assert int(row["calls"]) == day["calls"]
        assert int(row["turns"]) == day["turns"]
        assert int(row["trims"]) == day["trims"]
        assert int(row["errors"]) == day["errors"]
        if day["calls"]:
            assert int(row["input_p50"]) == day["input_per_call_p50"]
            assert int(row["input_p90"]) == day["input_per_call_p90"]
            assert round(float(row["cache_hit_rate"]), 4) == day["cache_hit_rate"]
            billable = day["billable_input_tokens"] + 0.25 * day["cached_tokens"]
            assert float(row["billable_equivalent"]) == billable
    # the charts are inline SVG, readable without JavaScript
    assert page.count('<svg class="chart"') >= 4
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")


async def test_a_date_range_selects_the_days(client: Client) -> None:
    today = datetime.now(UTC).date()
    start = today - timedelta(days=2)
    response = await client.get("/", params={"from": start.isoformat(), "to": today.isoformat()})
    assert response.status == 200
    assert sorted(overview_rows(await response.text())) == [
        (start + timedelta(days=n)).isoformat() for n in range(3)
    ]


async def test_bad_query_values_are_400_without_a_trace(client: Client) -> None:
    today = datetime.now(UTC).date()
    for params in (
        {"from": "yesterday"},
        {"to": "2026-13-01"},
        {"to": (today + timedelta(days=3)).isoformat()},
        {"from": today.isoformat(), "to": (today - timedelta(days=1)).isoformat()},
        {"from": "1990-01-01"},
    ):
        response = await client.get("/", params=params)
        body = await response.text()
        assert response.status == 400, params
        assert "Traceback" not in body
        assert "Bad request" in body
    response = await client.get("/chats/-1001000000777", params={"thread": "x"})
    assert response.status == 400
    for page in ("0", "2", "x"):
        assert (await client.get("/chats", params={"page": page})).status == 400, page


async def test_unknown_chats_and_paths_are_404(client: Client) -> None:
    for path in ("/chats/12345", "/chats/abc", "/nowhere"):
        response = await client.get(path)
        assert response.status == 404, path
        assert "Traceback" not in await response.text()


async def test_the_chat_list_shows_every_chat_with_its_window(
    client: Client, demo_data: DemoData
) -> None:
    response = await client.get("/chats")
    page = await response.text()
    assert response.status == 200
    assert f'data-chat="{demo_data.group_chat}"' in page
    assert "Design Review" in page  # the demo group's title
    # the group scene's own cap (300), not the shared 100 (issue 27)
    assert re.search(r"[\d,]+ / 8,000 tokens · \d+ / 300 messages", page)


@pytest.mark.slow
async def test_the_chat_page_is_exactly_what_context_show_prints(
    client: Client, demo_data: DemoData
) -> None:
    chat = demo_data.group_chat
    response = await client.get(f"/chats/{chat}")
    page = await response.text()
    assert response.status == 200
    done = run_tgbot("context", "show", "--chat", str(chat), env=demo_data.env())
    assert done.returncode == 0, done.stderr
    found = PREVIEW.search(page)
    assert found is not None
    shown = html.unescape(found.group(1))
    assert CLOCK_LINE.sub("time: …", shown) == CLOCK_LINE.sub("time: …", done.stdout.rstrip("\n"))
    split = shown.rsplit("\n", 1)[1]
    fixed, history, current, total = (
        int(n) for n in re.findall(r"(?:fixed|history|current|total) (\d+)", split)
    )
    assert f'data-split="fixed">{fixed:,}<' in page
    assert f'data-split="history">{history:,}<' in page
    assert f'data-split="current">{current:,}<' in page
    assert f'data-split="total">{total:,}<' in page
    # the alias table, the trims of the demo and the ledger's turns are there
    assert re.search(r"<code>m\d+</code>", page)
    assert 'id="trims"' in page
    assert re.search(r"turn_limit|message_limit|token_budget", page)  # a window move
    assert re.search(r'<tr class="turn-start"', page)


async def test_member_text_is_escaped(client: Client, demo_data: DemoData) -> None:
    page = await (await client.get(f"/chats/{demo_data.group_chat}")).text()
    assert HOSTILE_TEXT not in page
    assert HOSTILE_NAME not in page
    assert html.escape(HOSTILE_TEXT, quote=False).replace("'", "&#39;") in page
    assert "&lt;b&gt;Mallory&lt;/b&gt;" in page
    assert "<script>alert" not in page


async def test_health_and_metrics(client: Client, dashboard: Dashboard) -> None:
    response = await client.get("/healthz")
    assert response.status == 200
    metrics = await client.get("/metrics")
    assert metrics.status == 200
    assert metrics.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = await metrics.text()
    inbound = re.search(r"^tgbot_inbound_messages_total (\d+)", text, re.MULTILINE)
    assert inbound is not None
    assert int(float(inbound.group(1))) > 0
    for name in (
        "tgbot_model_calls_total",
        "tgbot_input_tokens_total",
        "tgbot_cached_input_tokens_total",
        "tgbot_output_tokens_total",
        "tgbot_history_trims_total",
        "tgbot_model_errors_total",
        "tgbot_turn_latency_seconds_bucket",
    ):
        assert name in text


async def test_pages_carry_strict_headers(client: Client, demo_data: DemoData) -> None:
    for path in ("/", "/chats", f"/chats/{demo_data.group_chat}", "/nowhere"):
        response = await client.get(path)
        assert "default-src 'none'" in response.headers["Content-Security-Policy"], path
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["X-Content-Type-Options"] == "nosniff"


async def test_the_chat_list_says_summary_yes_exactly_when_the_next_request_carries_one(
    client: Client,
) -> None:
    page = await (await client.get("/chats")).text()
    rows = re.findall(
        r'<tr data-chat="(-?\d+)">.*?<td class="l" data-field="summary">(yes|no)</td>',
        page,
        re.DOTALL,
    )
    assert rows
    said = dict(rows)
    assert "yes" in said.values(), "the demo group's next request carries a summary"
    for chat_id, shown in said.items():
        chat = await (await client.get(f"/chats/{chat_id}")).text()
        # the system prompt explains the marker with "- [Summary of …"; the request's own
        # summary message starts a line
        carries = re.search(r"^\[Summary of earlier conversation m", chat, re.MULTILINE)
        shown_carries = shown == "yes"
        assert shown_carries == bool(carries), chat_id
