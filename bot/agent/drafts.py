"""A reply shown while it is written, in a private chat: a `Draft` (`sendMessageDraft`).

A streaming provider's growing text is previewed with a `Draft`: one draft id per reply, at
most one call per `DRAFT_SECONDS` (the clock is injected, so the limit is tested without
sleeping), the final message still sent as usual. The first piece of text is held: a reply
that arrives in one piece is sent as the final message alone (a draft then would be one Bot
API call in three for nothing), and so is one streamed faster than `DRAFT_SECONDS`: the
first draft goes out with the first piece that arrives at least that long after the first.
A refusal from Telegram turns drafts off for that chat for the process's life
(`bot.agent.reply.Presence` makes the drafts and keeps that book); the reply arrives all the
same.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Protocol, runtime_checkable

log = logging.getLogger("tgbot.presence")

DRAFT_SECONDS = 1.0
"""At most one draft update this often ("about one a second")."""
DRAFT_TIMEOUT_SECONDS = 5.0
"""One draft update never holds the reply back longer than this (as a chat action)."""


@runtime_checkable
class DraftSender(Protocol):
    """Shows a reply being written (`sendMessageDraft`); the text is the model's Markdown."""

    async def send_draft(
        self, chat_id: int, draft_id: int, text: str, *, thread_id: int = 0
    ) -> None: ...


class Draft:
    """The live draft of one reply: call it with the text so far (a `TextSink`)."""

    def __init__(
        self,
        sender: DraftSender,
        chat_id: int,
        thread_id: int,
        *,
        monotonic: Callable[[], float],
        on_refused: Callable[[int], None],
    ) -> None:
        self._sender = sender
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._monotonic = monotonic
        self._on_refused = on_refused
        self.draft_id = random.randrange(1, 2**31 - 1)
        """Non-zero, the same for every update of this reply."""
        self._last: float | None = None
        self._held = False
        """The first piece of text arrived (and was held)."""
        self._off = False
        self.sent: list[str] = []
        """The texts shown, in order."""

    async def __call__(self, text: str) -> None:
        if self._off or not text.strip():
            return
        if not self._held:  # the whole reply, maybe: wait for a second piece
            self._held = True
            # and for a second to pass: a reply streamed faster than that shows no draft
            # (it would flash for a moment and cost a Bot API call; "typing…" is up)
            self._last = self._monotonic()
            return
        now = self._monotonic()
        if self._last is not None and now - self._last < DRAFT_SECONDS:
            return  # the next one (or the final message) shows more
        self._last = now
        try:
            await asyncio.wait_for(
                self._sender.send_draft(
                    self._chat_id, self.draft_id, text, thread_id=self._thread_id
                ),
                DRAFT_TIMEOUT_SECONDS,
            )
        except Exception as exc:
            log.info("drafts off in chat %s: %s", self._chat_id, exc)
            self._off = True
            self._on_refused(self._chat_id)
            return
        self.sent.append(text)
