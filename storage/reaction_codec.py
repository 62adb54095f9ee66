"""What a row of the reactions table holds <-> `StoredReaction`: pure, both directions, and
each member's latest reaction (`latest_reactions`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.ports import StoredReaction
from storage.codec import utc


def stored_reaction(row: Any) -> StoredReaction:
    return StoredReaction(
        chat_id=row.chat_id,
        thread_id=row.thread_id,
        message_id=row.message_id,
        user_id=row.user_id,
        user_name=row.user_name,
        emoji=row.emoji,
        created_at=utc(row.created_at),
    )


def reaction_row(reaction: StoredReaction) -> dict[str, Any]:
    return {
        "chat_id": reaction.chat_id,
        "thread_id": reaction.thread_id,
        "message_id": reaction.message_id,
        "user_id": reaction.user_id,
        "user_name": reaction.user_name,
        "emoji": reaction.emoji,
        "created_at": utc(reaction.created_at),
    }


def latest_reactions(reactions: Iterable[StoredReaction]) -> tuple[StoredReaction, ...]:
    """Each member's latest reaction per message and emoji, in time order: a member who
    toggles 👍 a thousand times counts once (several different emoji of one member, which
    Telegram allows, each count)."""
    latest: dict[tuple[int, int, int, int, str], StoredReaction] = {}
    for reaction in reactions:
        key = (
            reaction.chat_id,
            reaction.thread_id,
            reaction.message_id,
            reaction.user_id,
            reaction.emoji,
        )
        known = latest.get(key)
        if known is None or reaction.created_at >= known.created_at:
            latest.pop(key, None)  # re-insert: the dict keeps the latest's time order
            latest[key] = reaction
    return tuple(sorted(latest.values(), key=lambda r: r.created_at))
