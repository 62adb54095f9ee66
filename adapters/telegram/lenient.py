"""A lenient second reading of membership updates and messages that fail validation.

Telegram adds rights to `ChatMemberAdministrator` and `ChatMemberRestricted` as the Bot API
grows, and aiogram requires each of them; an update sent in an older or newer shape (a
July 2025 "bot promoted to administrator" without `can_send_welcome_messages`) then fails
validation and would be skipped, and the bot would never learn that it was promoted. What
the bot needs from such an update is the chat and the old and new status, so a membership
update that does not validate is read again with every right it lacks taken as not
granted (a missing date as none).

A message (or channel post, or an edit of one) fails the same way when one fact in it comes
in an older or newer shape: a unique gift from before `gift_id` (Bot API 9.x), a payment
without a field aiogram now requires. Skipping it would drop the whole post for one fact,
so it is read again, repaired in a few bounded rounds: a missing plain field is filled
neutrally (`""`, else `0`, `false` or `[]`, by what the next validation asks for), and a fact
that still does not validate is left out, the rest of the message kept. A message whose
own `message_id`, `date` or `chat` does not validate, and any other update, stays skipped.
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
MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")
_MESSAGE_ITSELF = frozenset({"message_id", "date", "chat"})
_ROUNDS = 12
"""Repairs tried before giving up (each round fixes every error the last one reported)."""
_NEUTRAL: tuple[object, ...] = ("", 0, False, [])
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


def lenient_update(item: Any, *, context: dict[str, Any] | None = None) -> Update | None:
    """`item` read leniently (module docstring): a membership update or a message; `None`
    when it is neither or cannot be repaired."""
    return lenient_membership(item, context=context) or lenient_message(item, context=context)


def lenient_message(item: Any, *, context: dict[str, Any] | None = None) -> Update | None:
    """The message update `item` with the facts it cannot validate filled in or left out;
    `None` when it is no message update or the message itself does not validate."""
    if not isinstance(item, dict):
        return None
    kind = next((k for k in MESSAGE_KINDS if isinstance(item.get(k), dict)), None)
    if kind is None:
        return None
    repaired = copy.deepcopy(item)
    tried: dict[tuple[Any, ...], int] = {}
    for _round in range(_ROUNDS):
        try:
            return Update.model_validate(repaired, context=context or {})
        except ValidationError as exc:
            errors = exc.errors()
        for error in errors:
            if not _repair(repaired, kind, tuple(error["loc"]), str(error["type"]), tried):
                return None
    return None


def _repair(
    update: dict[str, Any],
    kind: str,
    loc: tuple[Any, ...],
    error: str,
    tried: dict[tuple[Any, ...], int],
) -> bool:
    """Fix one validation error of `update[kind]` at `loc`; False when it cannot be."""
    if len(loc) < 2 or loc[0] != kind or loc[1] in _MESSAGE_ITSELF:
        return False
    message = update[kind]
    if not isinstance(message, dict) or loc[1] not in message:
        return False
    parent = _walk(message, loc[1:-1])
    field = loc[-1]
    if len(loc) > 2 and isinstance(parent, dict) and isinstance(field, str):
        step = tried.get(loc, -1) + 1 if error == "missing" or loc in tried else None
        if step is not None and step < len(_NEUTRAL):
            tried[loc] = step
            parent[field] = _NEUTRAL[step]
            return True
    message.pop(loc[1], None)  # this fact cannot be read: the rest of the message is kept
    return True


def _walk(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        if isinstance(node, dict) and isinstance(key, str):
            node = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return None
    return node
