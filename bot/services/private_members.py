"""Who counts as a member under `private_chats = "members"`: someone the bot has seen write
in an allowed group, or whom Telegram's `getChatMember` confirms in one.

The store is asked first (one indexed query over the platform messages); then each allowed
group's `getChatMember`, until one says member, administrator, creator or restricted-but-
member. Each verdict is kept for `ttl` seconds in a bounded cache (the oldest go first), and
a user's lookups in flight are shared, so a stranger writing a hundred messages costs at
most one query and one `getChatMember` per allowed group per `ttl`.

With an empty allow-list, "an allowed group" is every group: the store is asked about any
group; there is no list of groups to ask Telegram about.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from bot.errors import StorageUnavailable, TelegramError

log = logging.getLogger("tgbot.inbound")


@runtime_checkable
class SeenInGroups(Protocol):
    """The store's side: whether a user wrote in one of some groups."""

    async def seen_in_groups(self, user_id: int, chat_ids: Sequence[int]) -> bool:
        """Whether a stored platform message of `user_id` is in one of `chat_ids` (empty:
        in any group)."""
        ...


@runtime_checkable
class ChatMembership(Protocol):
    """The platform's side: `getChatMember`."""

    async def is_chat_member(self, chat_id: int, user_id: int) -> bool:
        """Whether the user is in the chat now (member, administrator, creator, or
        restricted but still a member)."""
        ...


class PrivateMembers:
    """Whether a user may have a private chat under `members` (`is_member`)."""

    def __init__(
        self,
        *,
        groups: Sequence[int],
        seen: SeenInGroups | None,
        platform: ChatMembership | None,
        ttl: float = 600.0,
        max_entries: int = 4096,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.any_group = not groups
        """No allow-list: every group counts."""
        self.groups = tuple(g for g in groups if g < 0)
        """The allowed groups (private chat ids in the allow-list are no groups)."""
        self.seen = seen
        self.platform = platform
        self.ttl = ttl
        self.max_entries = max_entries
        self._now = now
        self._verdicts: OrderedDict[int, tuple[float, bool]] = OrderedDict()
        self._asking: dict[int, asyncio.Future[bool]] = {}
        self.platform_calls = 0
        """`getChatMember` calls made (for tests and the doctor's curiosity)."""

    async def is_member(self, user_id: int) -> bool:
        now = self._now()
        cached = self._verdicts.get(user_id)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        asking = self._asking.get(user_id)
        if asking is not None:
            return await asyncio.shield(asking)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asking[user_id] = future
        try:
            verdict, sure = await self._ask(user_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._asking[user_id]
        future.set_result(verdict)
        if sure:
            self._keep(user_id, verdict, now)
        return verdict

    def saw(self, chat_id: int, user_id: int) -> None:
        """A user wrote in a group the bot serves: in an allowed one they are a member from
        now on (a "no" kept from before is forgotten); costs no query."""
        if chat_id < 0 and (self.any_group or chat_id in self.groups):
            self._keep(user_id, True, self._now())

    def _keep(self, user_id: int, verdict: bool, at: float) -> None:
        self._verdicts[user_id] = (at, verdict)
        self._verdicts.move_to_end(user_id)
        while len(self._verdicts) > self.max_entries:
            self._verdicts.popitem(last=False)

    async def _ask(self, user_id: int) -> tuple[bool, bool]:
        """(verdict, sure): a "no" the store could not back is not kept."""
        sure = True
        if self.seen is not None and (self.any_group or self.groups):
            try:
                if await self.seen.seen_in_groups(user_id, self.groups):
                    return True, True
            except StorageUnavailable:
                log.warning("could not ask the store whether %s wrote in a group", user_id)
                sure = False
        if self.platform is None:
            return False, sure
        for group in self.groups:
            self.platform_calls += 1
            try:
                if await self.platform.is_chat_member(group, user_id):
                    return True, True
            except TelegramError as exc:
                # "user not found", "chat not found": a no, as for a stranger
                log.info("getChatMember(%s, %s) failed: %s", group, user_id, exc)
        return False, sure
