"""From finding 28.11: one member toggling 👍 1,000 times was counted as 500 reactions in
the feedback the owner reads. Each member's latest reaction per message counts, on every
store backend (`reactions_between` feeds /usage, the daily summary and the dashboard)."""

from __future__ import annotations

from datetime import timedelta

from tests.test_storage.conftest import Store
from tests.test_storage.test_chat_events_contract import CHAT, T0, reaction


async def test_a_member_toggling_a_reaction_counts_once(store: Store) -> None:
    toggles = [reaction("👍", T0 + timedelta(seconds=2 * i)) for i in range(500)]
    others = [
        reaction("👍", T0 + timedelta(minutes=30), user=7_000_000_002, name="Bob"),
        reaction("👎", T0 + timedelta(minutes=31), user=7_000_000_003, name="Cy"),
        reaction("🔥", T0 + timedelta(minutes=32), message=2**33 + 6),  # Alice, another message
    ]
    await store.record_reactions([*toggles, *others])
    found = await store.reactions_between(T0, T0 + timedelta(days=1))
    assert sorted(r.emoji for r in found) == sorted(["👍", "👍", "👎", "🔥"])
    alice_on_first = [r for r in found if r.user_id == 7_000_000_001 and r.message_id == 2**33 + 5]
    assert len(alice_on_first) == 1
    assert alice_on_first[0].created_at == T0 + timedelta(seconds=998)
    assert found[0].chat_id == CHAT


async def test_toggling_stores_one_row_per_member_message_and_emoji(store: Store) -> None:
    """As the service records them: one call per toggle. A thousand toggles are one row
    (each emoji a member keeps on a message is one row of its own)."""
    for i in range(1_000):
        await store.record_reactions([reaction("👍", T0 + timedelta(seconds=i))])
    await store.record_reactions([reaction("🔥", T0 + timedelta(hours=1))])
    rows = await store.reactions_since(CHAT, 0, None, limit=10_000)
    assert [(r.emoji, r.created_at) for r in rows] == [
        ("👍", T0 + timedelta(seconds=999)),
        ("🔥", T0 + timedelta(hours=1)),
    ]
