"""The private-chat policy in effect, why, and its membership check (`members`)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.config import Settings
from bot.services.private_members import ChatMembership, PrivateMembers, SeenInGroups
from bot.store_ports import ConversationStore
from storage.group_members import SqlGroupMembers
from storage.sql import SqlStore


def private_members(
    settings: Settings, store: ConversationStore, platform: object
) -> PrivateMembers | None:
    """Under `members`: the store's platform messages, then `getChatMember` on the allowed
    groups when `platform` (the raw sender) can ask it; None under any other policy."""
    if settings.security.private_chats_in_effect != "members":
        return None
    seen: SeenInGroups | None
    if isinstance(store, SqlStore):
        seen = SqlGroupMembers(store.engine)
    else:
        seen = store if isinstance(store, SeenInGroups) else None
    return PrivateMembers(
        groups=settings.security.allowed_chats,
        seen=seen,
        platform=platform if isinstance(platform, ChatMembership) else None,
    )


def private_chats_said(settings: Settings) -> str:
    """What the policy in effect does and why, for `tgbot doctor` and `tgbot run`."""
    security = settings.security
    return private_policy_said(
        security.private_chats, security.allowed_chats, owner_known=settings.owner_id is not None
    )


def private_policy_said(
    private_chats: str | None, allowed_chats: Sequence[int], *, owner_known: bool
) -> str:
    """What a private-chat policy does and why: the one set (`private_chats`), else the
    default for `allowed_chats` (`bot.config.SecuritySettings.private_chats_in_effect`)."""
    policy = private_chats or ("members" if allowed_chats else "allow")
    owner = "the owner's" if owner_known else "the owner's (OWNER_ID unset)"
    does = {
        "allow": "the bot answers any Telegram user's private chat",
        "members": "the bot answers the private chats of members of the allowed groups "
        "(seen writing there, or confirmed by Telegram)"
        + ("" if allowed_chats else "; no allow-list: of any group it is in"),
        "owner": f"the bot answers only {owner} private chat",
        "allow_list": "the bot answers private chats of user ids in allowed_chats",
    }.get(policy, "unknown")
    if private_chats is not None:
        why = "set in [security] private_chats"
    elif allowed_chats:
        why = "the default because allowed_chats is set; [security] private_chats chooses"
    else:
        why = "the default without allowed_chats; [security] private_chats chooses"
    return f"{policy}: {does} ({why})"
