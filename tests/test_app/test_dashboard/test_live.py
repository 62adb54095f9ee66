"""`/events` and `/metrics` follow the bot as it works: ledger lines and `HistoryTrimmed`."""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient, TestServer

from bot.agent.events import EventBus
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_trims import TrimInfo
from bot.app.dashboard.live import LedgerTail
from bot.app.dashboard.server import Dashboard, build_application, open_dashboard
from bot.config import load_settings
from bot.context.history_trimmed import HistoryTrimmed
from bot.errors import ProviderUnavailable
from storage.migrate import upgrade_database
from tests.test_agent.rig import model_call

Client = TestClient[web.Request, web.Application]


def call(chat: int = -42, **fields: object) -> LedgerEntry:
    base: dict[str, object] = {
        "ts": datetime.now(UTC),
        "session": 7,
        "chat": chat,
        "scene": "group",
        "turn_id": "t-1",
        "provider": "default",
        "model": "m",
        "input_tokens": 1200,
        "cached_tokens": 1000,
        "output_tokens": 30,
        "latency_ms": 850,
    }
    base.update(fields)
    return LedgerEntry(**base)  # type: ignore[arg-type]


async def next_event(stream: ClientResponse) -> tuple[str, dict[str, object]]:
    """The next `event:`/`data:` pair of a server-sent events stream (comments skipped)."""
    kind = ""
    async with asyncio.timeout(10):
        while True:
            line = (await stream.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind:
                return kind, json.loads(line.removeprefix("data: "))


def tail_of(board: Dashboard) -> LedgerTail:
    assert isinstance(board.tail, LedgerTail), "a standalone dashboard follows the ledger"
    return board.tail


async def open_board(data_dir: Path, bus: EventBus | None = None) -> Dashboard:
    return open_dashboard(load_settings(data_dir=data_dir), bus=bus)


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[Client, Dashboard, LedgerWriter]]:
    board = await open_board(tmp_path)
    writer = LedgerWriter(tmp_path / "agent-traces", UTC)
    writer.append(call(turn_id="before"))  # written before the dashboard started: not live
    try:
        async with TestClient(TestServer(build_application(board))) as client:
            yield client, board, writer
    finally:
        await board.store.close()


async def test_a_model_call_arrives_on_the_stream(
    live: tuple[Client, Dashboard, LedgerWriter],
) -> None:
    client, board, writer = live
    stream = await client.get("/events")
    assert stream.headers["Content-Type"] == "text/event-stream"
    await stream.content.readline()  # the stream is open
    writer.append(call(turn_id="t-live", tool_calls=2, cache_write_tokens=150))
    writer.append(call(turn_id="t-cut", input_truncated_by_provider=True))
    tail_of(board).poll()
    kind, data = await next_event(stream)
    assert kind == "model_call"
    assert data["turn_id"] == "t-live"
    assert data["input_tokens"] == 1200
    assert data["tool_calls"] == 2
    assert data["cache_write_tokens"] == 150
    assert data["input_truncated_by_provider"] is False
    _, cut = await next_event(stream)
    assert cut["input_truncated_by_provider"] is True
    stream.close()


async def test_errors_and_trims_from_the_ledger_are_events_too(
    live: tuple[Client, Dashboard, LedgerWriter],
) -> None:
    client, board, writer = live
    stream = await client.get("/events")
    await stream.content.readline()
    trim = TrimInfo(
        reason="token_budget",
        dropped_turns=3,
        dropped_messages=7,
        kept_turns=10,
        tokens_before=9000,
        tokens_after=6000,
        budget=8000,
    )
    writer.append(call(error="ProviderUnavailable: <b>down</b>", input_tokens=None, trims=(trim,)))
    tail_of(board).poll()
    kinds = [await next_event(stream) for _ in range(3)]
    assert [k for k, _ in kinds] == ["model_call", "error", "trim"]
    assert kinds[1][1]["error"] == "ProviderUnavailable: <b>down</b>"  # JSON; the page sets text
    assert kinds[2][1]["dropped_turns"] == 3
    stream.close()


async def test_metrics_count_what_the_feed_saw(
    live: tuple[Client, Dashboard, LedgerWriter],
) -> None:
    client, board, writer = live
    writer.append(call(turn_id="a", iteration=1, latency_ms=1000))
    writer.append(call(turn_id="a", iteration=2, latency_ms=500, error="X: y"))
    writer.append(
        call(
            turn_id="b",
            session=8,
            latency_ms=100,
            cache_write_tokens=200,
            input_truncated_by_provider=True,
        )
    )
    assert tail_of(board).poll() == 3
    text = await (await client.get("/metrics")).text()

    def value(name: str) -> float:
        found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
        assert found is not None, name
        return float(found.group(1))

    assert value('tgbot_model_calls_total{scene="group"}') == 3  # the earlier line is not live
    assert value("tgbot_input_tokens_total") == 3600
    assert value("tgbot_cached_input_tokens_total") == 3000
    assert value("tgbot_output_tokens_total") == 90
    assert value("tgbot_cache_write_input_tokens_total") == 200
    assert value("tgbot_truncated_calls_total") == 1
    assert value("tgbot_model_errors_total") == 1
    assert value("tgbot_model_call_latency_seconds_count") == 3
    # turn `a` of session 7 is still open until it idles or its session starts another turn
    writer.append(call(turn_id="c"))
    tail_of(board).poll()
    text = await (await client.get("/metrics")).text()
    assert value("tgbot_turn_latency_seconds_count") == 1


async def test_inside_the_bot_the_event_bus_feeds_the_stream(tmp_path: Path) -> None:
    bus = EventBus()
    board = await open_board(tmp_path, bus=bus)
    assert board.tail is None  # no second source: each call is announced once
    try:
        async with TestClient(TestServer(build_application(board))) as client:
            stream = await client.get("/events")
            await stream.content.readline()
            await bus.publish(
                HistoryTrimmed(
                    dropped_messages=4,
                    dropped_turns=2,
                    kept_turns=9,
                    reason="turn_limit",
                    tokens_before=5000,
                    tokens_after=3000,
                    budget=8000,
                    session=7,
                    turn_id="t-bus",
                )
            )
            kind, data = await next_event(stream)
            assert (kind, data["turn_id"], data["reason"]) == ("trim", "t-bus", "turn_limit")
            # the model call carries the same trim: it is not announced a second time
            await bus.publish(model_call(turn_id="t-bus", error=ProviderUnavailable("502")))
            kinds = [await next_event(stream) for _ in range(2)]
            assert [k for k, _ in kinds] == ["model_call", "error"]
            assert kinds[0][1]["turn_id"] == "t-bus"
            assert kinds[0][1]["input_tokens"] == 1_000_000
            assert "ProviderUnavailable" in str(kinds[1][1]["error"])
            metrics = await (await client.get("/metrics")).text()
            assert "tgbot_history_trims_total 1.0" in metrics
            assert 'tgbot_model_calls_total{scene="group"} 1.0' in metrics
            stream.close()
    finally:
        await board.store.close()


def _recent_on(page: str) -> list[dict[str, object]]:
    found = re.search(r"data-recent='([^']*)'", page)
    assert found is not None
    recent: list[dict[str, object]] = json.loads(html.unescape(found[1]))
    return recent


async def test_the_live_panel_opens_with_the_last_20_calls(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path / "agent-traces", UTC)
    for n in range(25):
        writer.append(call(turn_id=f"t-{n}", session=7 if n % 2 else 8))
    writer.append(call(turn_id="t-failed", session=7, error="ProviderUnavailable: HTTP 503"))
    writer.append(call(turn_id="t-<script>", session=7))
    await upgrade_database(f"sqlite+aiosqlite:///{tmp_path / 'tgbot.sqlite3'}")
    board = await open_board(tmp_path)
    try:
        async with TestClient(TestServer(build_application(board))) as client:
            overview = await (await client.get("/")).text()
    finally:
        await board.store.close()
    recent = _recent_on(overview)
    calls = [e["data"]["turn_id"] for e in recent if e["kind"] == "model_call"]  # type: ignore[index]
    assert len(calls) == 20
    assert calls[-1] == "t-<script>"  # oldest first: the newest is added last, on top
    assert calls[0] == "t-7"
    assert [e["kind"] for e in recent].count("error") == 1
    assert "<script>" not in overview.split("data-recent='")[1].split("'")[0]
    assert 'data-zone="UTC"' in overview


def test_a_call_a_fallback_took_says_so_on_the_live_panel() -> None:
    from bot.app.dashboard.live import call_events

    entry = LedgerEntry(
        ts=datetime(2026, 12, 7, 4, 0, tzinfo=UTC),
        session=1,
        chat=-77,
        scene="group",
        turn_id="t1",
        provider="backup",
        route="backup",
        fallback_from="main",
        model="backup-model",
    )
    (event,) = call_events(entry, with_trim=True)
    assert (event.data["route"], event.data["fallback_from"]) == ("backup", "main")
    script = (Path(__file__).parents[3] / "bot/app/dashboard/static/live.js").read_text()
    assert '" (fallback for " + data.fallback_from + ")"' in script
