"""Shared fixtures. PostgreSQL tests need TEST_POSTGRES_URL (scripts/with-postgres sets it)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge behaviour, never speed: a loaded machine (helpers running suites in
# parallel, CI on two cores) must not fail an example for taking longer than 200 ms.
settings.register_profile(
    "loaded", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("loaded")


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
