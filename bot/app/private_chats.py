"""The private-chat policy in effect, why, and its membership check (`members`)."""

from __future__ import annotations

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
    """What the policy in effect does and why, for `tgbot doctor` and `tgbot init`."""
    security = settings.security
    policy = security.private_chats_in_effect
    owner = "the owner's" if settings.owner_id is not None else "the owner's (OWNER_ID unset)"
    does = {
        "allow": "the bot answers any Telegram user's private chat",
        "members": "the bot answers the private chats of members of the allowed groups "
        "(seen writing there, or confirmed by Telegram)"
        + ("" if security.allowed_chats else "; no allow-list: of any group it is in"),
        "owner": f"the bot answers only {owner} private chat",
        "allow_list": "the bot answers private chats of user ids in allowed_chats",
    }[policy]
    if security.private_chats is not None:
        why = "set in [security] private_chats"
    elif security.allowed_chats:
        why = "the default because allowed_chats is set; [security] private_chats chooses"
    else:
        why = "the default without allowed_chats; [security] private_chats chooses"
    return f"{policy}: {does} ({why})"
