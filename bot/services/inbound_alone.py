"""Messages that go alone: a command, and a message held back behind another member's turn.

`InboundService.on_messages` stores most messages one transaction per round; what goes
alone (`InboundService._goes_alone`) comes here, one message at a time, so it keeps its
order and its turn: a command is claimed by its update and handled within the rate limits;
a message that addresses the bot while another member's turn waits out its merge window
waits its turn (`bot.services.turn_joins.join_later`). A plain mention never comes here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.domain.facts import InboundMessage
from bot.errors import StorageUnavailable
from bot.ports import SessionInfo
from bot.services.commands import Commands
from bot.services.inbound_gate import InboundGate
from bot.services.inbound_rules import platform_message_of, record_of
from bot.services.turn_joins import join_later
from bot.services.turn_scheduler import TurnScheduler
from bot.store_ports import Claims, HistoryStore, PlatformMessages

log = logging.getLogger("tgbot.inbound")


class AloneMessages:
    """Stores (and answers) the messages of a batch that go alone."""

    def __init__(
        self,
        *,
        history: HistoryStore,
        platform_messages: PlatformMessages,
        claims: Claims,
        gate: InboundGate,
        turns: TurnScheduler,
        commands: Commands | None,
        answers: Callable[[InboundMessage, SessionInfo], bool],
    ) -> None:
        self.history = history
        self.platform_messages = platform_messages
        self.claims = claims
        self.gate = gate
        self.turns = turns
        self.commands = commands
        self.answers = answers
        """Whether a message is answered (`InboundService._answers`)."""

    async def handle(self, session: SessionInfo, message: InboundMessage) -> None:
        """One message on its own; a bug there is logged with its update and does not fail
        the rest (the poller would hand every other update again). A transient error (the
        database busy or away, out of file handles) is raised: the update stays
        unconfirmed and comes again."""
        try:
            await self._store_alone(session, message)
        except (StorageUnavailable, OSError):
            raise
        except Exception:
            log.exception("handling update %s failed", message.update_id)

    async def _store_alone(self, session: SessionInfo, message: InboundMessage) -> None:
        """A command (claimed by its update, within the limits), or a message that waits
        its turn behind another member's; anything else the command handler leaves is
        stored as in a round."""
        if message.command and self.commands is not None and self.commands.handles(message):
            if message.update_id is not None and not await self.claims.claim_update(
                message.update_id
            ):
                return
            # commands start work too (/retry a whole turn, /help a post): same limits
            if not await self.gate.admit(message):
                return
            if await self.commands(message, session):
                return
        state = self.turns.state(session.id)
        async with self.turns.storing(session) as joining:
            if (
                await self.platform_messages.find_platform_message(
                    message.chat_id, message.message_id
                )
                is not None
            ):
                log.info("duplicate message %s/%s", message.chat_id, message.message_id)
                return
            answer = self.answers(message, session)
            pending = state.pending
            merged = state.merges(message.sender.id)
            # someone else's turn waits out its merge window: this message waits its turn
            # (and so does whatever the chat gets until it joined, here or on another
            # worker: `joining`, to keep Telegram's order)
            defer = joining or state.holds_back(message.sender.id, answer=answer)
            admission = await self.gate.admission(message, session, answer=answer)
            if defer:
                await self.platform_messages.record_platform_messages(
                    [platform_message_of(message)]
                )
                if pending is not None:
                    pending.hurry.set()  # keep the wait (and the unstored gap) short

                async def join() -> None:
                    await self._store_inbound(
                        session, message, merged=False, refused=admission.refused
                    )

                await join_later(self.turns, session, message, join, answer=admission.admitted)
            else:
                await self._store_inbound(
                    session, message, merged=merged, refused=admission.refused
                )
        if admission.refused:
            await self.gate.refuse(message)
        if not defer and admission.admitted:
            self.turns.schedule(session, message)

    async def _store_inbound(
        self, session: SessionInfo, message: InboundMessage, *, merged: bool, refused: bool
    ) -> None:
        await self.history.append(
            session.id,
            [record_of(message, merged=merged, refused=refused)],
            platform_messages=[platform_message_of(message)],
        )
