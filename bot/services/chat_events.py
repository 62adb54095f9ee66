"""The bot's membership of chats and the reactions on its messages (`bot.ports.ChatEventSink`).

- Added to a chat (`my_chat_member`): the chat's session opens (or reopens).
- Removed or kicked: every session of the chat is marked closed, and `ClosedChatGuard` (the
  messenger every outbound path of the app goes through: turns and their tools, command
  replies, refusals, the daily summary, recovery notices) sends nothing more there. The
  inbound service also stops scheduling turns for a closed session, so no model call is
  spent on an answer that could not be sent.
- A reaction on one of the bot's own messages is stored; the next turn in that chat shows
  it in `[Reactions since your last reply]` and the usage report counts 👍/👎 per day.
  Reactions on anyone else's message are ignored; a withdrawn reaction is only logged
  (feedback once given stays counted, the model already saw it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.domain.facts import MembershipChange, ReactionChange
from bot.domain.ids import Scene, SessionKey
from bot.ports import (
    Clock,
    StoredReaction,
)
from bot.services.guard import PrivateChats, chat_allowed, membership_to_check
from bot.services.messenger_relay import ClosedChats
from bot.store_ports import ChatEventStore, PlatformMessages, SessionStore

log = logging.getLogger("tgbot.chat_events")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatEventPolicy:
    owner_id: int | None
    bot_id: int | None
    allowed_chats: tuple[int, ...] = ()
    private_chats: PrivateChats = "allow"


class ChatEventService:
    """Implements `bot.ports.ChatEventSink`."""

    def __init__(
        self,
        *,
        sessions: SessionStore,
        platform_messages: PlatformMessages,
        events: ChatEventStore,
        policy: ChatEventPolicy,
        clock: Clock,
        closed: ClosedChats | None = None,
    ) -> None:
        self.sessions = sessions
        self.platform_messages = platform_messages
        self.events = events
        self.policy = policy
        self.clock = clock
        self.closed = closed

    async def on_membership(self, change: MembershipChange) -> None:
        if change.change == "added":
            if not chat_allowed(
                change.chat_id,
                self.policy.allowed_chats,
                self.policy.owner_id,
                self.policy.private_chats,
            ):
                log.info("added to chat %s (not in the allow-list): ignored", change.chat_id)
                return
            # under `members` a stranger's private chat (they unblocked the bot) opens no
            # session: it opens with the first message the gate lets in; a known one reopens
            if (
                membership_to_check(change.chat_id, self.policy.owner_id, self.policy.private_chats)
                is None
            ):
                await self.sessions.open_session(
                    SessionKey(chat_id=change.chat_id),
                    scene=self._scene(change),
                    title=change.chat_title,
                )
            reopened = await self.events.set_chat_closed(change.chat_id, False)
            if self.closed is not None:
                self.closed.note(change.chat_id, False)
            log.info(
                "added to chat %s by %s (%s)%s",
                change.chat_id,
                change.actor.id,
                change.status,
                "; reopened" if reopened else "",
            )
        elif change.change == "removed":
            closed = await self.events.set_chat_closed(change.chat_id, True)
            if self.closed is not None:
                self.closed.note(change.chat_id, True)
            log.info(
                "%s from chat %s by %s; %d session(s) closed, nothing more is sent there",
                change.status,
                change.chat_id,
                change.actor.id,
                closed,
            )
        else:
            log.info("membership in chat %s updated: %s", change.chat_id, change.status)

    async def on_reaction(self, reaction: ReactionChange) -> None:
        if not chat_allowed(
            reaction.chat_id,
            self.policy.allowed_chats,
            self.policy.owner_id,
            self.policy.private_chats,
        ):
            return
        target = await self.platform_messages.find_platform_message(
            reaction.chat_id, reaction.message_id
        )
        if target is None or not self._is_ours(target.sender_id, is_bot=target.is_bot):
            log.debug(
                "reaction on %s/%s ignored (not the bot's message)",
                reaction.chat_id,
                reaction.message_id,
            )
            return
        if reaction.removed:
            log.info(
                "%s withdrew %s on %s/%s",
                reaction.actor.id,
                " ".join(reaction.removed),
                reaction.chat_id,
                reaction.message_id,
            )
        await self.events.record_reactions(
            [
                StoredReaction(
                    chat_id=reaction.chat_id,
                    thread_id=target.thread_id,
                    message_id=reaction.message_id,
                    user_id=reaction.actor.id,
                    user_name=reaction.actor.name,
                    emoji=emoji,
                    # when it was handled: after the reply it is on was stored, so "since
                    # the last reply" never misses one dated within the reply's second
                    created_at=self.clock.now(),
                )
                for emoji in reaction.added
            ]
        )

    def _is_ours(self, sender_id: int | None, *, is_bot: bool) -> bool:
        if self.policy.bot_id is not None:
            return sender_id == self.policy.bot_id
        return is_bot

    def _scene(self, change: MembershipChange) -> Scene:
        if change.chat_type == "private":
            owner = self.policy.owner_id
            return "owner" if owner is not None and change.chat_id == owner else "private"
        return "group"
