"""Compaction (issue 17) on the dashboard: the overview's figures, the chat's timeline and
turns, the live event kind and the counter.

The demo's long group conversation already makes summary calls (`purpose: "compaction"`);
the data dir here is a copy of it with three more appended for the group's session (two today,
one yesterday), so a second day has them too.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.agent.events import EventBus
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.app.dashboard.server import build_application, open_dashboard
from tests.test_agent.rig import model_call
from tests.test_app.test_dashboard.conftest import DemoData, serving
from tests.test_app.test_dashboard.test_live import call, next_event, tail_of
from tests.test_app.test_dashboard.test_pages import overview_rows, report_json

Client = TestClient[web.Request, web.Application]
TIMELINE_COMPACTION = re.compile(
    r'<li data-kind="compaction".*?data-field="input">([\d,]+)</span>.*?'
    r'data-field="output">([\d,]+)</span>',
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Compacted:
    demo: DemoData
    session: int
    calls: tuple[LedgerEntry, ...]


def summary_call(session: int, chat: int, at: datetime, n: int) -> LedgerEntry:
    return LedgerEntry(
        ts=at,
        session=session,
        chat=chat,
        scene="group",
        turn_id=f"fold-{n}",
        iteration=0,
        purpose="compaction",
        provider="offline",
        model="scripted",
        input_tokens=3000 + 100 * n,
        cached_tokens=1000,
        output_tokens=200 + n,
        est_fixed=400,
        est_history=0,
        est_current=2500,
        latency_ms=900,
    )


@pytest.fixture
def compacted(demo_data: DemoData, tmp_path: Path) -> Compacted:
    data_dir = tmp_path / "data"
    shutil.copytree(demo_data.data_dir, data_dir)
    copy = DemoData(data_dir=data_dir, group_chat=demo_data.group_chat)
    traces = data_dir / "agent-traces"
    # ours are the newest, on the demo's day and the day before, whenever the demo ran
    # (its ledger's stamps are the scenario's, and midnight may have passed since)
    now = max(e.ts for e in read_entries(traces)) + timedelta(seconds=3)
    sessions = {e.session for e in read_entries(traces) if e.chat == copy.group_chat}
    assert len(sessions) == 1, "the demo group has one session"
    session = sessions.pop()
    calls = (
        summary_call(session, copy.group_chat, now - timedelta(days=1), 1),
        summary_call(session, copy.group_chat, now - timedelta(seconds=2), 2),
        summary_call(session, copy.group_chat, now - timedelta(seconds=1), 3),
    )
    writer = LedgerWriter(traces, UTC)
    for entry in calls:
        writer.append(entry)
    return Compacted(demo=copy, session=session, calls=calls)


@pytest.fixture
async def compacted_client(compacted: Compacted) -> AsyncIterator[Client]:
    async with serving(open_dashboard(compacted.demo.settings())) as client:
        yield client


@pytest.mark.slow
async def test_the_overview_counts_compactions_as_the_usage_report_does(
    compacted_client: Client, compacted: Compacted
) -> None:
    page = await (await compacted_client.get("/")).text()
    report = report_json(compacted.demo, 14)
    rows = overview_rows(page)
    days = [day for day in report["days"] if day["compaction_calls"]]
    assert len(days) == 2  # yesterday (ours) and today (the demo's and ours)
    assert days[0]["compaction_calls"] == 1
    for day in report["days"]:
        if day["day"] not in rows:  # before the first day with data: not in the range
            assert not day["calls"]
            continue
        row = rows[day["day"]]
        assert int(row["compaction_calls"]) == day["compaction_calls"]
        assert int(row["calls"]) == day["calls"]  # summary calls are model calls too
        if day["compaction_share"] is None:
            assert row["compaction_share"] == "-"
        else:
            assert round(float(row["compaction_share"]), 4) == day["compaction_share"]
            assert 0 < day["compaction_share"] <= 1  # yesterday: only our summary call
    total = report["total"]
    card = re.search(
        r'data-total="compaction_calls">(\d+)</span>.*?'
        r'data-total="compaction_share" data-value="([^"]*)"',
        page,
        re.DOTALL,
    )
    assert card is not None
    assert int(card.group(1)) == total["compaction_calls"] > 3
    assert round(float(card.group(2)), 4) == total["compaction_share"]


async def test_a_ledger_without_compactions_shows_no_compaction_column(
    demo_data: DemoData, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(demo_data.data_dir, data_dir)  # the store; the ledger is replaced
    shutil.rmtree(data_dir / "agent-traces")
    LedgerWriter(data_dir / "agent-traces", UTC).append(call())
    async with serving(
        open_dashboard(DemoData(data_dir=data_dir, group_chat=-42).settings())
    ) as client:
        page = await (await client.get("/")).text()
    assert overview_rows(page)[datetime.now(UTC).date().isoformat()]["calls"] == "1"
    assert 'data-field="compaction_calls"' not in page
    assert 'id="compactions"' not in page


async def test_the_chat_page_shows_compactions_in_its_timeline_and_turns(
    compacted_client: Client, compacted: Compacted
) -> None:
    chat = compacted.demo.group_chat
    page = await (await compacted_client.get(f"/chats/{chat}")).text()
    shown = [(int(i.replace(",", "")), int(o)) for i, o in TIMELINE_COMPACTION.findall(page)]
    ledger = sorted(
        (
            e
            for e in read_entries(compacted.demo.data_dir / "agent-traces")
            if e.chat == chat and e.purpose == "compaction"
        ),
        key=lambda e: e.ts,
        reverse=True,
    )
    assert len(ledger) > 3
    assert shown == [(e.input_tokens, e.output_tokens) for e in ledger]
    assert shown[:2] == [(3300, 203), (3200, 202)]  # ours, the newest
    # beside the demo's trims, in one timeline
    timeline = page[page.index('id="trims"') : page.index("</ol>")]
    assert 'data-kind="trim"' in timeline
    # the recent turns mark summary calls
    for n in (2, 3):
        row = re.search(
            rf'<tr[^>]*data-purpose="(\w+)">\s*<td[^>]*>[^<]*</td>\s*'
            rf'<td class="l"><code>fold-{n}</code>',
            page,
        )
        assert row is not None
        assert row.group(1) == "compaction"
    assert '<span class="pill compaction">compaction</span>' in page[page.index('id="turns"') :]


async def test_a_summary_call_from_the_ledger_is_a_compaction_event_and_counted(
    tmp_path: Path,
) -> None:
    board = open_dashboard(DemoData(data_dir=tmp_path, group_chat=-42).settings())
    writer = LedgerWriter(tmp_path / "agent-traces", UTC)
    try:
        async with TestClient(TestServer(build_application(board))) as client:
            stream = await client.get("/events")
            await stream.content.readline()
            writer.append(call(turn_id="t-a"))
            writer.append(call(turn_id="t-a", iteration=0, purpose="compaction", output_tokens=250))
            assert tail_of(board).poll() == 2
            kinds = [await next_event(stream) for _ in range(2)]
            assert [k for k, _ in kinds] == ["model_call", "compaction"]
            assert kinds[1][1]["purpose"] == "compaction"
            assert kinds[1][1]["output_tokens"] == 250
            stream.close()
            text = await (await client.get("/metrics")).text()
            assert "tgbot_compactions_total 1.0" in text
            assert 'tgbot_model_calls_total{scene="group"} 2.0' in text
    finally:
        await board.store.close()


async def test_inside_the_bot_a_compaction_on_the_bus_is_its_own_event(tmp_path: Path) -> None:
    bus = EventBus()
    async with serving(
        open_dashboard(DemoData(data_dir=tmp_path, group_chat=-42).settings(), bus=bus)
    ) as client:
        stream = await client.get("/events")
        await stream.content.readline()
        await bus.publish(model_call(turn_id="t-fold", iteration=0, purpose="compaction", trims=()))
        kind, data = await next_event(stream)
        assert (kind, data["turn_id"]) == ("compaction", "t-fold")
        text = await (await client.get("/metrics")).text()
        assert "tgbot_compactions_total 1.0" in text
        stream.close()
