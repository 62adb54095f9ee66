"""The dashboard only reads (issue 27 item 7): it creates no file, says "no bot data in
DATA_DIR=… yet" for an empty directory (pages and /healthz alike), and still serves a data
directory it may not write to."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from bot.app.dashboard.server import open_dashboard
from bot.config import load_settings
from tests.test_app.test_dashboard.conftest import DemoData, serving


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
async def empty_client(tmp_path: Path) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    async with serving(
        open_dashboard(load_settings(data_dir=tmp_path / "data", bot_locale="en"))
    ) as client:
        yield client


async def test_an_empty_data_dir_is_named_and_nothing_is_created(
    tmp_path: Path,
    empty_client: TestClient,  # type: ignore[type-arg]
) -> None:
    health = await empty_client.get("/healthz")
    assert health.status == 503
    assert f"no bot data in DATA_DIR={tmp_path / 'data'} yet" in await health.text()
    chats = await empty_client.get("/chats")
    assert chats.status == 503
    assert "no bot data in DATA_DIR=" in await chats.text()
    assert _files(tmp_path) == set(), "the dashboard created files"


async def test_a_data_dir_it_cannot_write_is_served_and_left_unchanged(
    demo_data: DemoData, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(demo_data.data_dir, data)
    for name in ("tgbot.sqlite3-wal", "tgbot.sqlite3-shm"):
        (data / name).unlink(missing_ok=True)
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*")}
    # root ignores permission bits, so the check is that nothing is written or created
    os.chmod(data, 0o555)
    async with serving(
        open_dashboard(DemoData(data_dir=data, group_chat=demo_data.group_chat).settings())
    ) as client:
        assert (await client.get("/healthz")).status == 200
        page = await client.get(f"/chats/{demo_data.group_chat}")
        assert page.status == 200
        assert (await client.get("/chats")).status == 200
        os.chmod(data, 0o755)
    after = {p: p.stat().st_mtime_ns for p in data.rglob("*")}
    assert after == before, "the dashboard changed or created files"
