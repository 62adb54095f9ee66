"""The overview's feedback card: reactions on the bot's messages over the chosen days."""

from __future__ import annotations

import html
import itertools
from datetime import UTC, datetime

from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.app.dashboard.server import Dashboard
from bot.app.wiring import open_store
from bot.ports import StoredReaction

Client = TestClient[web.Request, web.Application]


MEMBERS = itertools.count(
    1001
)  # each reaction from another member: one member's repeats count once


def reaction(emoji: str, day: int) -> StoredReaction:
    return StoredReaction(
        chat_id=-100,
        message_id=9,
        user_id=next(MEMBERS),
        user_name="Alice",
        emoji=emoji,
        created_at=datetime(2020, 1, day, 12, tzinfo=UTC),
    )


async def test_the_overview_counts_feedback_reactions_of_the_range(
    client: Client, dashboard: Dashboard
) -> None:
    # days long before the demo's traffic, so the shared demo data is otherwise untouched;
    # written by the bot's own store: the dashboard's only reads
    store = await open_store(dashboard.settings)
    try:
        await store.record_reactions(
            [reaction("👍", 2), reaction("👍", 3), reaction("👎", 3), reaction("🎉", 3)]
        )
    finally:
        await store.close()
    response = await client.get("/", params={"from": "2020-01-03", "to": "2020-01-04"})
    assert response.status == 200
    page = html.unescape(await response.text())
    assert 'id="feedback">👍 1 · 👎 1</span>' in page
    assert "1 other, on the bot's messages" in page
