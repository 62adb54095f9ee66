"""Answering again: an edit recorded and its trigger re-answered on a new branch, and `/retry`.

Both start from the stored conversation as it is now and run a scheduled turn through the
chat's `TurnScheduler`; neither stores what it cannot answer. `InboundService.on_edit`
hands edits here (`record_edit`, the re-answer queued per chat) and the `/retry` command
calls `retry`.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from bot.domain.facts import InboundMessage
from bot.domain.records import UserRecord
from bot.ports import NewRecord, SessionInfo
from bot.services.inbound_gate import InboundGate
from bot.services.inbound_rules import (
    last_answered_of,
    last_member_record,
    platform_message_of,
    record_of,
)
from bot.services.turn_scheduler import TurnScheduler
from bot.services.turn_spawning import queue_edit, spawn_turn
from bot.store_ports import HistoryStore, PlatformMessages

log = logging.getLogger("tgbot.inbound")


class AnswerAgain:
    """Re-answers in one chat's conversation: an edit of the newest answered trigger, and a
    member's `/retry` of their own last answered turn."""

    def __init__(
        self,
        *,
        history: HistoryStore,
        platform_messages: PlatformMessages,
        gate: InboundGate,
        turns: TurnScheduler,
    ) -> None:
        self._history = history
        self._platform_messages = platform_messages
        self._gate = gate
        self._turns = turns

    async def record_edit(self, session: SessionInfo, message: InboundMessage) -> bool:
        """Record an edit's new text and queue the re-answer for the chat (`edited`); never
        waits on a turn. False when the edited message is not stored yet (the caller stores
        it as the message). An edit that leaves no words (a caption removed) takes the old
        words out of storage too: the member took them back
        (`PlatformMessages.erase_message`)."""
        async with self._turns.storing(session):
            known = await self._platform_messages.find_platform_message(
                message.chat_id, message.message_id
            )
            if known is not None:
                await self._platform_messages.record_platform_messages(
                    [platform_message_of(message, known=known)]
                )
                if known.text and not message.text.strip() and message.event is None:
                    await self._platform_messages.erase_message(
                        message.chat_id, message.message_id, keep_media=True
                    )
        if known is None:
            return False

        async def reanswer(newest: InboundMessage) -> None:
            await self.edited(session, newest)

        queue_edit(self._turns, session, message, reanswer)
        return True

    async def edited(self, session: SessionInfo, message: InboundMessage) -> None:
        """Re-answer an edited trigger on a new branch (under the turn lock), if it is the
        newest member message and was answered."""
        loaded = await self._history.load_history(session.id, max_records=200)
        last_user = last_member_record(loaded.records)
        if last_user is None or last_user.message_id != message.message_id:
            return
        answered = any(r.body.kind == "assistant" for r in loaded.records if r.id > last_user.id)
        if not answered:
            return
        if not await self._gate.admit(message):
            return
        await self._history.append(
            session.id,
            [record_of(message, merged=False)],
            parent_id=last_user.parent_id,
            at_root=last_user.parent_id is None,
        )
        await self._turns.run(session, reply_to=message.message_id, trigger="edit")

    async def retry(self, session: SessionInfo, requester_id: int) -> bool:
        """Regenerate the requester's own last answered turn; False when they have none.
        The new answer comes from a scheduled turn (`drain` waits for it).

        When nobody spoke since, the answer is replaced on a new branch. When others did (a
        busy group), their messages stay: the requester's message is asked again at the end
        of the conversation and answered there, as a reply to the original. Either way the
        turn answers the requester's message, so its tools act with the requester's rights,
        never with those of whoever spoke last."""
        loaded = await self._history.load_history(session.id, max_records=200)
        trigger = last_answered_of(loaded.records, requester_id)
        if trigger is None:
            log.info("nothing to /retry for %s", requester_id)
            return False
        assert isinstance(trigger.body, UserRecord)
        newest = last_member_record(loaded.records)
        if newest is not None and newest.id == trigger.id:
            spawn_turn(
                self._turns, session, reply_to=trigger.message_id, leaf=trigger.id, trigger="retry"
            )
            return True
        again = NewRecord(
            body=replace(trigger.body, merged=False, refused=False),
            created_at=trigger.created_at,
            message_ids=trigger.message_ids,
            tokens=trigger.tokens,
        )

        async def ask_again() -> None:
            await self._history.append(session.id, [again])

        spawn_turn(
            self._turns, session, reply_to=trigger.message_id, before=ask_again, trigger="retry"
        )
        return True
