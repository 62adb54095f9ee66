"""`LocalChatLock`: the `bot.ports.ChatLock` of a single worker (per-chat asyncio locks).

`InboundService` holds a chat's lock in two scopes, so a long turn never blocks storing the
next message:

- `"store"`: around "is this message new? then append it" (the de-duplication check and
  the write, so a retried update sent to two workers is stored once, in arrival order);
- `"turn"`: around running a turn, so two workers never answer in one chat at once.

`LocalChatLock` (asyncio locks) serves one worker on SQLite; `storage.locks.AdvisoryChatLock`
(PostgreSQL advisory locks) serves several workers on one database. Both satisfy `ChatLock`.
`ChatLock` and `LockScope` are declared in `bot.ports`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from bot.domain.ids import SessionKey
from bot.ports import LockScope


@dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class LocalChatLock:
    """Per-chat asyncio locks for a single worker; an entry lives only while it is used."""

    def __init__(self) -> None:
        self._entries: dict[tuple[LockScope, str, int, int], _Entry] = {}

    @asynccontextmanager
    async def hold(self, key: SessionKey, *, scope: LockScope = "turn") -> AsyncIterator[None]:
        name = (scope, key.platform, key.chat_id, key.thread_id)
        entry = self._entries.setdefault(name, _Entry())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[name]

    @asynccontextmanager
    async def try_hold(self, key: SessionKey, *, scope: LockScope = "turn") -> AsyncIterator[bool]:
        name = (scope, key.platform, key.chat_id, key.thread_id)
        if name in self._entries:  # held, or about to be
            yield False
            return
        async with self.hold(key, scope=scope):
            yield True

    @property
    def held(self) -> int:
        """How many chats have a holder or a waiter (for tests and diagnostics)."""
        return len(self._entries)

    async def close(self) -> None:
        return None
