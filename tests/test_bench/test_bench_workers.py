"""The webhook-workers row of `bench.bench_load`: a real `tgbot run --webhook` worker under a
load where each member writes again once answered, so every message is its own turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.bench_load import run_webhook_workers


@pytest.mark.slow  # starts a `tgbot run` process
def test_every_message_is_answered_by_its_own_turn(tmp_path: Path) -> None:
    result = asyncio.run(run_webhook_workers(1, 3, 4, tmp_path, database_url=None))
    assert result.replies == 12  # no merged turns: the per-reply CPU compares across rows
    assert result.stored_in_order
    assert result.cpu_seconds > 0
    assert "| SQLite | 1 | 3 × 4 = 12 | 12 |" in result.markdown()
