"""Live events between workers over PostgreSQL LISTEN/NOTIFY (`storage.postgres.live_channel`):
what one worker publishes reaches the others' dashboards (not itself), a payload over
PostgreSQL's limit is shortened and still delivered, a lost LISTEN connection comes back
(logged once), and the dashboard's `/events` carries another worker's model call."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from aiohttp.test_utils import TestClient, TestServer

from bot.agent.events import EventBus
from bot.app.dashboard.live import LivePublisher
from bot.app.dashboard.server import build_application, open_dashboard
from bot.config import load_settings
from bot.context.history_trimmed import HistoryTrimmed
from storage.engine import create_engine_for
from storage.postgres.live_channel import MAX_PAYLOAD_BYTES, PgLiveChannel, bounded_payload
from tests.deadlines import EVENT, deadline
from tests.test_agent.rig import SESSION, model_call
from tests.test_scaleout.conftest import fresh_postgres

NOTIFY_LIMIT = 8000
"""PostgreSQL refuses a NOTIFY payload of this many bytes or more."""


def test_a_payload_over_the_limit_is_shortened_to_fit_and_keeps_its_small_fields() -> None:
    message = {"kind": "error", "data": {"chat": -42, "error": "é" * 20_000, "model": "m" * 900}}
    payload = bounded_payload(message)
    assert len(payload.encode()) <= MAX_PAYLOAD_BYTES < NOTIFY_LIMIT
    decoded = json.loads(payload)
    assert decoded["kind"] == "error"
    assert decoded["data"]["chat"] == -42
    assert decoded["data"]["error"].startswith("éé")
    assert decoded["data"]["error"].endswith("…")
    many = {"kind": "trim", "data": {f"field{n}": n for n in range(3000)}}  # no long string
    assert json.loads(bounded_payload(many)) == {"kind": "trim", "data": {"truncated": True}}
    small = {"kind": "trim", "data": {"when": datetime(2026, 12, 1, tzinfo=UTC)}}
    assert json.loads(bounded_payload(small))["data"]["when"] == "2026-12-01 00:00:00+00:00"


class Inbox:
    """What a listener was handed, with a wait for the n-th message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._changed.set()

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        async with asyncio.timeout(deadline(EVENT)):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.messages


@pytest.fixture
async def channels() -> AsyncIterator[tuple[PgLiveChannel, PgLiveChannel, str]]:
    url = await fresh_postgres(migrate=False)
    one = PgLiveChannel.for_url(url, backoff_first=0.05)
    two = PgLiveChannel.for_url(url, backoff_first=0.05)
    try:
        yield one, two, url
    finally:
        await one.aclose()
        await two.aclose()


async def listening(channel: PgLiveChannel, inbox: Inbox) -> asyncio.Task[None]:
    task = asyncio.create_task(channel.listen(inbox))
    async with asyncio.timeout(deadline(EVENT)):
        await channel.listening.wait()
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.postgres
async def test_what_one_worker_publishes_reaches_the_other_not_itself(
    channels: tuple[PgLiveChannel, PgLiveChannel, str],
) -> None:
    one, two, _url = channels
    heard_by_one, heard_by_two = Inbox(), Inbox()
    tasks = [await listening(one, heard_by_one), await listening(two, heard_by_two)]
    try:
        one.publish({"kind": "model_call", "data": {"chat": 1, "error": "x" * 30_000}})
        two.publish({"kind": "trim", "data": {"chat": 2}})
        (from_one,) = await heard_by_two.wait_for(1)
        (from_two,) = await heard_by_one.wait_for(1)
        assert from_one["kind"] == "model_call"
        assert from_one["data"]["chat"] == 1
        assert from_one["data"]["error"].endswith("…")  # shortened, not refused
        assert from_two == {"kind": "trim", "data": {"chat": 2}}
        await asyncio.gather(one.settled(), two.settled())
        assert (one.dropped, two.dropped) == (0, 0)
        one.publish({"kind": "trim", "data": {"chat": 3}})
        await heard_by_two.wait_for(2)
        assert len(heard_by_one.messages) == 1  # its own never comes back
    finally:
        for task in tasks:
            await stop(task)


@pytest.mark.postgres
async def test_a_lost_listen_connection_is_re_established_and_logged_once(
    channels: tuple[PgLiveChannel, PgLiveChannel, str], caplog: pytest.LogCaptureFixture
) -> None:
    one, two, url = channels
    inbox = Inbox()
    task = await listening(two, inbox)
    engine = create_engine_for(url)
    caplog.set_level(logging.INFO, logger="tgbot.live")
    relistens = Relistens()
    logging.getLogger("tgbot.live").addHandler(relistens)
    try:
        for round_ in (1, 2):  # the backend killed twice: each loss is one warning
            async with engine.begin() as conn:  # what a PostgreSQL restart does to it
                killed = (
                    await conn.execute(
                        sa.text(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"
                            " AND datname = current_database()"  # not another test worker's
                        )
                    )
                ).scalar_one()
            assert killed == 1
            await relistens.wait_for(round_)  # LISTEN issued again
            one.publish({"kind": "trim", "data": {"round": round_}})
            await inbox.wait_for(round_)
        assert [m["data"] for m in inbox.messages] == [{"round": 1}, {"round": 2}]
        lines = [r.getMessage() for r in caplog.records if r.name == "tgbot.live"]
        assert sum("LISTEN lost" in line for line in lines) == 2, lines
        assert sum("listening again" in line for line in lines) == 2, lines
    finally:
        logging.getLogger("tgbot.live").removeHandler(relistens)
        await stop(task)
        await engine.dispose()


class Relistens(logging.Handler):
    """Counts "listening again" lines of the live channel, with a wait for the n-th."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self._changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def emit(self, record: logging.LogRecord) -> None:
        if "listening again" in record.getMessage():
            self.count += 1
            self._loop.call_soon_threadsafe(self._changed.set)

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(deadline(EVENT)):
            while self.count < count:
                self._changed.clear()
                await self._changed.wait()


@pytest.mark.postgres
async def test_the_dashboard_of_one_worker_streams_the_model_calls_of_another(
    channels: tuple[PgLiveChannel, PgLiveChannel, str], tmp_path: Path
) -> None:
    one, two, url = channels
    settings = load_settings(data_dir=tmp_path, database_url=url)
    board = open_dashboard(settings, bus=EventBus(), channel=two)  # worker B's dashboard
    other = EventBus()  # worker A's runtime
    LivePublisher(one).attach(other)
    async with TestClient(TestServer(build_application(board))) as client:
        async with asyncio.timeout(deadline(EVENT)):
            await two.listening.wait()
        stream = await client.get("/events")
        await stream.content.readline()  # "retry:" once connected
        await other.publish(model_call(turn_id="turn-on-a"))
        await other.publish(
            HistoryTrimmed(
                session=5, turn_id="turn-on-a", reason="token_budget", dropped_turns=2,
                dropped_messages=4, kept_turns=3, tokens_before=900, tokens_after=400,
                budget=500,
            )
        )  # fmt: skip
        seen: list[tuple[str, dict[str, Any]]] = []
        async with asyncio.timeout(deadline(EVENT)):
            kind = ""
            while len(seen) < 2:
                line = (await stream.content.readline()).decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    seen.append((kind, json.loads(line.removeprefix("data: "))))
        stream.close()
    await board.store.close()
    assert seen[0][0] == "model_call"
    assert seen[0][1]["chat"] == SESSION.key.chat_id
    assert seen[0][1]["turn_id"] == "turn-on-a"
    assert seen[1][0] == "trim"
    assert seen[1][1]["dropped_turns"] == 2
