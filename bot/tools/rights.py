"""Whose rights a tool acts with: the member who triggered the turn.

A member may have the bot delete the bot's own messages and the member's own; anyone
else's only when the member is the bot's owner or an administrator of that chat. Whether a
member administers a chat is asked from the platform and remembered for a minute, so a
burst of tool calls asks once. A refusal is a `ToolError` the model reads; nothing is sent.
The tool list stays the same for everyone (the cached prompt prefix holds): rights are
checked when a tool runs.

See docs/architecture.md, Tools and rights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.errors import TelegramError, ToolError
from bot.ports import Clock, Messenger
from bot.store_ports import PlatformMessages

ADMIN_CACHE_SECONDS = 60.0


@dataclass(slots=True)
class ChatAdmins:
    """Who administers a chat, asked from the platform and cached for `ttl_seconds`."""

    messenger: Messenger
    clock: Clock
    ttl_seconds: float = ADMIN_CACHE_SECONDS
    _known: dict[tuple[int, int], tuple[bool, datetime]] = field(default_factory=dict)

    async def is_admin(self, chat_id: int, user_id: int) -> bool:
        now = self.clock.now()
        cached = self._known.get((chat_id, user_id))
        if cached is not None and cached[1] > now:
            return cached[0]
        answer = await self.messenger.is_chat_admin(chat_id, user_id)
        if len(self._known) > 10_000:  # a long-running process forgets stale answers
            self._known = {k: v for k, v in self._known.items() if v[1] > now}
        self._known[(chat_id, user_id)] = (answer, now + timedelta(seconds=self.ttl_seconds))
        return answer


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRights:
    """The rights of the member whose message started the turn (`requester_id`; None when
    no member did, e.g. a turn answering a chat event: then only the bot's own messages)."""

    requester_id: int | None
    owner_id: int | None
    bot_id: int | None
    admins: ChatAdmins

    async def check_may_delete(
        self, chat_id: int, message_id: int, platform_messages: PlatformMessages
    ) -> None:
        """Raise `ToolError` ("not allowed: …") unless the requester may delete it."""
        message = await platform_messages.find_platform_message(chat_id, message_id)
        author = None if message is None else message.sender_id
        if author is not None and author == self.bot_id:
            return
        requester = self.requester_id
        if requester is not None and author == requester:
            return
        if requester is not None and await self._privileged(chat_id, requester):
            return
        whose = "an unknown author's" if author is None else "another member's"
        raise ToolError(
            f"not allowed: the member who asked may delete only their own messages and "
            f"the bot's; this is {whose} message, and only the owner or a chat "
            "administrator may have it deleted",
            code="not_allowed",
        )

    async def requester_privileged(self, chat_id: int) -> bool:
        """Whether the member who asked is the owner, or an administrator of `chat_id`."""
        requester = self.requester_id
        return requester is not None and await self._privileged(chat_id, requester)

    async def _privileged(self, chat_id: int, user_id: int) -> bool:
        if self.owner_id is not None and user_id == self.owner_id:
            return True
        if chat_id > 0:  # a private chat has no administrators
            return False
        try:
            return await self.admins.is_admin(chat_id, user_id)
        except TelegramError as exc:
            raise ToolError(
                f"not allowed: could not ask Telegram who administers this chat ({exc})",
                code="not_allowed",
            ) from exc
