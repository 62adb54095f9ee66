"""A lenient second reading of membership updates that fail validation.

Telegram adds rights to `ChatMemberAdministrator` and `ChatMemberRestricted` as the Bot API
grows, and aiogram requires each of them; an update sent in an older or newer shape (a
July 2025 "bot promoted to administrator" without `can_send_welcome_messages`) then fails
validation and would be skipped, and the bot would never learn that it was promoted. What
the bot needs from such an update is the chat and the old and new status, so a membership
update that does not validate is read again with every right it lacks taken as not
granted (a missing date as none). Any other update that does not validate stays skipped.
"""

from __future__ import annotations

import copy
from typing import Any

from aiogram.types import (
    ChatMemberAdministrator,
    ChatMemberBanned,
    ChatMemberLeft,
    ChatMemberMember,
    ChatMemberOwner,
    ChatMemberRestricted,
    Update,
)
from pydantic import BaseModel, ValidationError

MEMBERSHIP_KINDS = ("my_chat_member", "chat_member")
_BY_STATUS: dict[str, type[BaseModel]] = {
    "creator": ChatMemberOwner,
    "administrator": ChatMemberAdministrator,
    "member": ChatMemberMember,
    "restricted": ChatMemberRestricted,
    "left": ChatMemberLeft,
    "kicked": ChatMemberBanned,
}


def lenient_membership(item: Any, *, context: dict[str, Any] | None = None) -> Update | None:
    """The membership update `item` with the rights it lacks filled in, validated; `None`
    when it is no membership update or still does not validate."""
    if not isinstance(item, dict):
        return None
    kind = next((k for k in MEMBERSHIP_KINDS if isinstance(item.get(k), dict)), None)
    if kind is None:
        return None
    repaired = copy.deepcopy(item)
    event = repaired[kind]
    for side in ("old_chat_member", "new_chat_member"):
        member = event.get(side)
        if isinstance(member, dict):
            _fill(member)
    try:
        return Update.model_validate(repaired, context=context or {})
    except ValidationError:
        return None


def _fill(member: dict[str, Any]) -> None:
    model = _BY_STATUS.get(str(member.get("status", "")))
    if model is None:
        return
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in member or not field.is_required():
            continue
        if name.startswith(("can_", "is_")):
            member[key] = False
        elif name == "until_date":
            member[key] = 0
