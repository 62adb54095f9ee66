"""Updates about a chat rather than a message in it: the bot's membership and reactions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, cast

from aiogram.types import (
    Chat,
    ChatMemberUpdated,
    MessageReactionUpdated,
    ReactionTypeCustomEmoji,
    ReactionTypeEmoji,
    ReactionTypePaid,
    ReactionTypeUnion,
    User,
)

from adapters.telegram.message_parts import chat_name_of, user_sender
from bot.domain.facts import MembershipChange, MembershipChangeKind, ReactionChange, Sender

ChatType = Literal["private", "group", "supergroup", "channel"]
_PRESENT = frozenset({"creator", "administrator", "member"})


def parse_membership(event: ChatMemberUpdated, *, update_id: int | None) -> MembershipChange:
    """The bot's membership change in `event.chat` (an update's `my_chat_member`)."""
    before = _present(event.old_chat_member)
    after = _present(event.new_chat_member)
    change: MembershipChangeKind = (
        "added" if after and not before else "removed" if before and not after else "updated"
    )
    return MembershipChange(
        update_id=update_id,
        chat_id=event.chat.id,
        chat_type=_chat_type(event.chat),
        chat_title=event.chat.title,
        date=_utc(event.date),
        actor=user_sender(event.from_user),
        change=change,
        status=str(event.new_chat_member.status),
    )


def parse_reaction(event: MessageReactionUpdated, *, update_id: int | None) -> ReactionChange:
    """What changed in one member's reactions to one message (an update's `message_reaction`)."""
    old = tuple(_label(r) for r in event.old_reaction)
    new = tuple(_label(r) for r in event.new_reaction)
    return ReactionChange(
        update_id=update_id,
        chat_id=event.chat.id,
        message_id=event.message_id,
        date=_utc(event.date),
        actor=_reactor(event.chat, event.user, event.actor_chat),
        added=tuple(r for r in new if r not in old),
        removed=tuple(r for r in old if r not in new),
    )


def _present(member: object) -> bool:
    status = str(getattr(member, "status", ""))
    if status == "restricted":
        return bool(getattr(member, "is_member", False))
    return status in _PRESENT


def _reactor(chat: Chat, user: User | None, actor_chat: Chat | None) -> Sender:
    if user is not None:
        return user_sender(user)
    if actor_chat is not None:
        kind: Literal["anonymous_admin", "channel"] = (
            "anonymous_admin" if actor_chat.id == chat.id else "channel"
        )
        return Sender(
            id=actor_chat.id, name=chat_name_of(actor_chat), username=actor_chat.username, kind=kind
        )
    return Sender(id=0, name="")


def _label(reaction: ReactionTypeUnion) -> str:
    match reaction:
        case ReactionTypeEmoji(emoji=emoji):
            return str(emoji)
        case ReactionTypeCustomEmoji(custom_emoji_id=custom):
            return f"custom_emoji:{custom}"
        case ReactionTypePaid():
            return "paid"
        case _:
            return str(getattr(reaction, "type", "unknown"))


def _chat_type(chat: Chat) -> ChatType:
    kind = str(chat.type)
    return (
        cast(ChatType, kind) if kind in ("private", "group", "supergroup", "channel") else "group"
    )


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
