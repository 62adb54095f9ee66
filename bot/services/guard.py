"""Who may use the bot: the chat allow-list, the private-chat policy, owner-only commands,
and rate limits.

The owner (checked by id, never by name) is exempt from every rate limit, and the owner's
private chat (whose chat id is the owner's user id) is always allowed, whatever
`allowed_chats` and `private_chats` say: an operator cannot lock themselves out.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.domain.facts import Sender

PrivateChats = Literal["allow", "members", "owner", "allow_list"]
"""Members' private chats: `allow` every one (the allow-list is for groups), `members` those
of people seen in an allowed group or confirmed members of one (`membership_to_check`, then
`bot.services.private_members`), `owner` only the owner's, `allow_list` those whose user id
is in `allowed_chats` (every one when it is empty)."""


def is_owner(sender: Sender, owner_id: int | None) -> bool:
    """The owner is the configured id, checked on a real user sender (never a display
    name, an anonymous admin or a channel)."""
    return owner_id is not None and sender.kind == "user" and sender.id == owner_id


def chat_allowed(
    chat_id: int,
    allowed: Sequence[int],
    owner_id: int | None = None,
    private_chats: PrivateChats = "allow",
    *,
    direct_with: int | None = None,
) -> bool:
    """Groups: every one when the allow-list is empty, else the listed ones. Private chats
    (positive ids: a private chat's id is its user's id) as `private_chats` says; the
    owner's always. A channel's direct-messages chat (`direct_with`: the member writing)
    is a one-to-one conversation: `private_chats` governs it too, the member's id standing
    for the chat's in `owner` and `allow_list`. `members` lets a one-to-one chat pass here:
    whose membership then decides is `membership_to_check`'s (the inbound gate asks; a
    stored session was admitted by it, so recovery and reactions need not)."""
    if owner_id is not None and chat_id == owner_id:
        return True
    if direct_with is not None:  # a channel's direct messages: a one-to-one conversation
        match private_chats:
            case "allow" | "members":
                return True
            case "owner":
                return owner_id is not None and direct_with == owner_id
            case "allow_list":
                return not allowed or chat_id in allowed or direct_with in allowed
    if chat_id > 0:
        match private_chats:
            case "allow" | "members":
                return True
            case "owner":
                return False
            case "allow_list":
                return not allowed or chat_id in allowed
    return not allowed or chat_id in allowed


def membership_to_check(
    chat_id: int,
    owner_id: int | None,
    private_chats: PrivateChats,
    *,
    direct_with: int | None = None,
) -> int | None:
    """Under `members`, the user whose membership of an allowed group decides a one-to-one
    chat (a private chat's user, a direct-messages chat's member); None when `chat_allowed`
    alone decides (another policy, a group, the owner)."""
    if private_chats != "members":
        return None
    user = direct_with if direct_with is not None else chat_id if chat_id > 0 else None
    if user is None or (owner_id is not None and user == owner_id):
        return None
    return user


@dataclass(slots=True)
class RateLimiter:
    """Sliding one-minute counts per user and per chat (0 = unlimited)."""

    per_user: int
    per_chat: int
    _users: dict[int, deque[float]] = field(default_factory=dict)
    _chats: dict[int, deque[float]] = field(default_factory=dict)
    _warned: dict[int, float] = field(default_factory=dict)
    _calls: int = 0

    SWEEP_EVERY = 1024
    """Every this many checks, counts that ran out are forgotten, so memory follows the
    users and chats of the last minute, not everyone ever seen."""

    def allow(self, *, user_id: int, chat_id: int, now: float) -> bool:
        self._calls += 1
        if self._calls % self.SWEEP_EVERY == 0:
            self.sweep(now)
        user_ok = _take(self._users, user_id, self.per_user, now, commit=False)
        chat_ok = _take(self._chats, chat_id, self.per_chat, now, commit=False)
        if not (user_ok and chat_ok):
            return False
        _take(self._users, user_id, self.per_user, now, commit=True)
        _take(self._chats, chat_id, self.per_chat, now, commit=True)
        return True

    def should_warn(self, chat_id: int, now: float) -> bool:
        """One polite refusal per chat per minute, not one per message."""
        last = self._warned.get(chat_id)
        if last is not None and now - last < 60:
            return False
        self._warned[chat_id] = now
        return True

    def sweep(self, now: float) -> None:
        """Forget counts and refusals older than a minute."""
        for buckets in (self._users, self._chats):
            for key in [k for k, b in buckets.items() if not b or now - b[-1] >= 60]:
                del buckets[key]
        for key in [k for k, at in self._warned.items() if now - at >= 60]:
            del self._warned[key]

    @property
    def tracked(self) -> int:
        """How many users, chats and refusals are remembered (for tests)."""
        return len(self._users) + len(self._chats) + len(self._warned)


class LocalRateLimits:
    """Implements `bot.ports.RateLimits` with this process's sliding one-minute counts."""

    def __init__(self, limiter: RateLimiter, now: Callable[[], float] = time.monotonic) -> None:
        self.limiter = limiter
        self._now = now

    async def take(self, *, user_id: int, chat_id: int) -> bool:
        return self.limiter.allow(user_id=user_id, chat_id=chat_id, now=self._now())

    async def warn_once(self, chat_id: int) -> bool:
        return self.limiter.should_warn(chat_id, self._now())


@dataclass(slots=True)
class OncePerMinute:
    """Says yes to a key at most once a minute (refusals: one per chat per minute)."""

    _last: dict[object, float] = field(default_factory=dict)

    def __call__(self, key: object, now: float) -> bool:
        if len(self._last) > 4096:
            for old in [k for k, at in self._last.items() if now - at >= 60]:
                del self._last[old]
        last = self._last.get(key)
        if last is not None and now - last < 60:
            return False
        self._last[key] = now
        return True


def _take(
    buckets: dict[int, deque[float]], key: int, limit: int, now: float, *, commit: bool
) -> bool:
    if limit <= 0:
        return True
    bucket = buckets.setdefault(key, deque())
    while bucket and now - bucket[0] >= 60:
        bucket.popleft()
    if len(bucket) >= limit:
        return False
    if commit:
        bucket.append(now)
    return True
