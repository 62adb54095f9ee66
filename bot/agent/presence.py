"""Alive while thinking: "typing…" in the chat for as long as a turn runs.

Telegram shows a chat action for about five seconds, so `Presence` sends
`typing` as the turn starts and again every `RENEW_SECONDS` while it runs (model calls and
tool rounds alike), in the turn's thread. One small task per turn; `stop()` ends it before
the reply goes out, so no action ever follows the reply (an action in flight is let finish,
not cut off, so its request cannot reach Telegram after the reply's). A failed action is
logged and the turn goes on: typing is a courtesy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

log = logging.getLogger("tgbot.presence")

RENEW_SECONDS = 4.0
"""Under Telegram's five seconds, so the indicator never lapses between renewals."""
ACTION_TIMEOUT_SECONDS = 5.0
"""One action never holds the reply back longer than this."""


@runtime_checkable
class ChatActions(Protocol):
    """Shows a chat action (typing) in a chat or one of its topics."""

    async def send_typing(self, chat_id: int, *, thread_id: int = 0) -> None: ...


class Typing:
    """The typing loop of one turn."""

    def __init__(self, actions: ChatActions, chat_id: int, thread_id: int, *, renew: float) -> None:
        self._actions = actions
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._renew = renew
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"typing:{self._chat_id}")

    async def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                await asyncio.wait_for(
                    self._actions.send_typing(self._chat_id, thread_id=self._thread_id),
                    ACTION_TIMEOUT_SECONDS,
                )
            except Exception as exc:  # a courtesy: the turn goes on without it
                log.info("typing in chat %s failed: %s", self._chat_id, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self._renew)

    async def stop(self) -> None:
        """End the loop; returns once no action is in flight (idempotent)."""
        self._stopped.set()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await task

    def cancel(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None


class Presence:
    """Starts a `Typing` per turn; without `actions` (a platform without them) it is idle."""

    def __init__(self, actions: ChatActions | None, *, renew: float = RENEW_SECONDS) -> None:
        self._actions = actions
        self._renew = renew

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: int, thread_id: int = 0) -> AsyncIterator[Typing | None]:
        """Typing for the block; the block calls `stop()` before it sends its reply. Leaving
        the block (a cancelled turn too) ends the loop."""
        if self._actions is None:
            yield None
            return
        typing = Typing(self._actions, chat_id, thread_id, renew=self._renew)
        typing.start()
        try:
            yield typing
        except BaseException:
            typing.cancel()
            raise
        else:
            await typing.stop()


def chat_actions_of(messenger: object) -> ChatActions | None:
    """The messenger as `ChatActions`, when it can show them."""
    return messenger if isinstance(messenger, ChatActions) else None
