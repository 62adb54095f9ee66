"""Whether a user wrote in one of some groups (`private_chats = "members"`), the same on
every backend: in memory (`testkit.memory_store`), SQLite and PostgreSQL
(`storage.group_members`), and on SQL through an index, not a scan of every message."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from bot.domain.platform_messages import PlatformMessage
from bot.services.private_members import SeenInGroups
from storage.engine import create_engine_for
from storage.group_members import SqlGroupMembers
from storage.sql import SqlStore
from tests.test_storage.conftest import Store

GROUP = -100123
OTHER_GROUP = -100456
ALICE = 1001
BOB = 1002
AT = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


def said(chat_id: int, message_id: int, sender_id: int) -> PlatformMessage:
    return PlatformMessage(
        chat_id=chat_id, message_id=message_id, sender_id=sender_id, sender_name="x", date=AT
    )


def members_of(store: Store) -> SeenInGroups:
    if isinstance(store, SqlStore):
        return SqlGroupMembers(store.engine)
    assert isinstance(store, SeenInGroups)
    return store


async def test_a_user_is_seen_only_in_the_groups_they_wrote_in(store: Store) -> None:
    await store.record_platform_messages(
        [said(GROUP, 1, ALICE), said(OTHER_GROUP, 2, BOB), said(BOB, 3, BOB)]
    )
    members = members_of(store)
    assert await members.seen_in_groups(ALICE, [GROUP])
    assert await members.seen_in_groups(ALICE, [OTHER_GROUP, GROUP])
    assert not await members.seen_in_groups(ALICE, [OTHER_GROUP])
    assert not await members.seen_in_groups(BOB, [GROUP])
    assert not await members.seen_in_groups(BOB, [BOB])  # a private chat is no group...
    assert await members.seen_in_groups(BOB, [])  # ...and no list means any group
    assert not await members.seen_in_groups(ALICE + 7, [])


async def test_the_question_is_answered_from_an_index(sql_url: str) -> None:
    if not sql_url.startswith("sqlite"):
        return  # PostgreSQL's planner picks a scan on a table this small
    engine = create_engine_for(sql_url)
    try:
        async with engine.connect() as conn:
            plan = (
                await conn.execute(
                    sa.text(
                        "EXPLAIN QUERY PLAN SELECT 1 FROM platform_events "
                        "WHERE sender_id = 1 AND chat_id IN (-1, -2) LIMIT 1"
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    assert "ix_platform_events_sender" in " ".join(str(row[-1]) for row in plan)
