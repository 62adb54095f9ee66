"""Serving: beside the bot when DASHBOARD_PORT is set, and one clear line when it cannot."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from bot.agent.events import EventBus
from bot.app.dashboard.server import open_dashboard, start_beside_bot, start_dashboard
from bot.errors import ConfigError
from tests.test_app.test_dashboard.conftest import DemoData


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_the_bot_serves_no_dashboard_without_a_port(demo_data: DemoData) -> None:
    assert await start_beside_bot(demo_data.settings(), EventBus()) is None


async def test_the_bot_serves_the_dashboard_on_its_port(demo_data: DemoData) -> None:
    port = free_port()
    running = await start_beside_bot(demo_data.settings(dashboard_port=port), EventBus())
    assert running is not None
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            async with http.get(f"http://127.0.0.1:{port}/chats") as response:
                assert response.status == 200
                assert "Design Review" in await response.text()
    finally:
        await running.aclose()


async def test_a_busy_port_is_one_line(demo_data: DemoData) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        board = open_dashboard(demo_data.settings())
        try:
            with pytest.raises(
                ConfigError, match=f"DASHBOARD_PORT: cannot listen on 127.0.0.1:{port}"
            ):
                await start_dashboard(board, host="127.0.0.1", port=port)
        finally:
            await board.store.close()
