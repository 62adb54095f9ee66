"""The `/settings` store's contract, the same in memory, on SQLite and on PostgreSQL
(`storage.chat_settings`): a change is read back by a new engine (another worker, a
restart), a second change replaces the first, `None` clears it, chats stay apart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.services.chat_settings import ChatSettingsStore, LocalChatSettings
from storage.chat_settings import SqlChatSettings
from storage.engine import create_engine_for
from tests.test_storage.conftest import BACKENDS, database_url

AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_changes_are_read_back_replaced_and_cleared(backend: str, tmp_path: Path) -> None:
    engines = []

    async def opened() -> ChatSettingsStore:
        if backend == "memory":
            return local
        engine = create_engine_for(url)
        engines.append(engine)
        return SqlChatSettings(engine)

    local = LocalChatSettings()
    url = "" if backend == "memory" else await database_url(backend, tmp_path)
    try:
        first = await opened()
        assert await first.load() == {}
        await first.change(-100, "keywords", ["deploy", "部署"], by=7, at=AT)
        await first.change(-100, "enabled", False, by=7, at=AT)
        await first.change(-200, "ambient", "judge", by=8, at=AT)
        other = await opened()  # another worker, or the next start
        assert await other.load() == {
            -100: {"keywords": ["deploy", "部署"], "enabled": False},
            -200: {"ambient": "judge"},
        }
        await other.change(-100, "enabled", True, by=7, at=AT)
        await other.change(-200, "ambient", None, by=8, at=AT)
        assert await first.load() == {-100: {"keywords": ["deploy", "部署"], "enabled": True}}
    finally:
        for engine in engines:
            await engine.dispose()
