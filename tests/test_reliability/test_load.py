"""Many chats at once through aiogram's real client and the fake Bot API (the CI size of
`bench/bench_load.py`, which reports the 200 x 50 figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_load import run_load

pytestmark = pytest.mark.slow


async def test_forty_chats_at_once_store_every_message_once_and_in_order(tmp_path: Path) -> None:
    result = await run_load(40, 6, tmp_path)

    assert result.stored_in_order  # each chat's 6 messages, once each, in order
    # every message is answered, bar messages merged into the next one's turn (how many
    # merge depends on the machine's speed, so only the bounds are checked): each chat's
    # last message is never merged into a later one, so every chat has a reply
    assert result.chats <= result.replies <= result.messages
