"""A data dir made by `tgbot demo`, plus one hostile message, for the dashboard to read.

The session's one demo run (tests/test_app/conftest.py) is copied; then a member
called `<b>Mallory</b>` posts `<script>…</script>` into the demo group through the real
inbound path, unanswered, so it is the current message of the group's next request.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from adapters.llm.scripted import ScriptedModel
from bot.app.dashboard.server import Dashboard, build_application, open_dashboard
from bot.app.demo_scenario import GROUP_CHAT
from bot.app.wiring import build_app, open_store
from bot.config import Settings, load_settings
from bot.domain.facts import Sender
from tests.fakes import RecordingMessenger, inbound
from tests.test_app.conftest import DemoRun

ROOT = Path(__file__).resolve().parents[3]
HOSTILE_TEXT = "<script>alert('pwned')</script> is this shown as text?"
HOSTILE_NAME = "<b>Mallory</b>"
DASHBOARD_SECRET = "dash-Secret-0123456789abcdef"


@dataclass(frozen=True, slots=True)
class DemoData:
    data_dir: Path
    group_chat: int

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DATA_DIR": str(self.data_dir),
            "BOT_LOCALE": "en",
            "BOT_TOKEN": "123456:SECRET-bot-token",
            **extra,
        }

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(data_dir=self.data_dir, bot_locale="en", **overrides)


def run_tgbot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.app.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _post_hostile_message(settings: Settings) -> None:
    store = await open_store(settings)
    app = build_app(
        settings,
        store=store,
        messenger=RecordingMessenger(),
        bot_id=999,
        bot_name="Helper",
        offline=ScriptedModel.demo(),
    )
    try:
        await app.inbound.on_message(
            inbound(
                chat_id=GROUP_CHAT,
                message_id=9001,
                text=HOSTILE_TEXT,
                sender=Sender(id=66, name=HOSTILE_NAME),
                at=datetime.now(UTC),
            )
        )
        await app.inbound.drain()
    finally:
        await app.routes.aclose()
        await store.close()


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory, demo_run: DemoRun) -> DemoData:
    # a copy of the session's one demo run (in-process, so the dashboard's tests stay in the
    # inner loop; the real `tgbot demo` command has its own process test)
    data_dir = demo_run.copy_to(tmp_path_factory.mktemp("dashboard") / "demo")
    data = DemoData(data_dir=data_dir, group_chat=GROUP_CHAT)
    asyncio.run(
        _post_hostile_message(
            data.settings(
                triggers={"merge_window_seconds": 0},
                security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
            )
        )
    )
    return data


Client = TestClient[web.Request, web.Application]


@asynccontextmanager
async def serving(board: Dashboard) -> AsyncIterator[Client]:
    """A test client of `board`'s pages; the board's store is closed afterwards."""
    try:
        async with TestClient(TestServer(build_application(board))) as test_client:
            yield test_client
    finally:
        await board.store.close()


@pytest.fixture
async def dashboard(demo_data: DemoData) -> AsyncIterator[Dashboard]:
    board = open_dashboard(demo_data.settings())
    try:
        yield board
    finally:
        await board.store.close()


@pytest.fixture
async def client(dashboard: Dashboard) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    async with TestClient(TestServer(build_application(dashboard))) as test_client:
        yield test_client
