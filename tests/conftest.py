"""Shared fixtures. PostgreSQL tests need TEST_POSTGRES_URL (scripts/with-postgres sets it)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _clean_bot_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read the developer's real bot settings from the environment."""
    for name in list(os.environ):
        if name.startswith(("BOT_", "LLM_", "TELEGRAM_")) or name in {
            "OWNER_ID",
            "DATABASE_URL",
            "DATA_DIR",
        }:
            monkeypatch.delenv(name, raising=False)
