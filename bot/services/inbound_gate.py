"""Who may start work on the inbound path: the allow-list and private-chat policy (under
`members`, a membership check), the rate limits (the owner exempt), and the refusals they
send."""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from bot.domain.facts import InboundMessage
from bot.ports import Messenger, RateLimits, SessionInfo
from bot.services.guard import (
    LocalRateLimits,
    RateLimiter,
    chat_allowed,
    is_owner,
    membership_to_check,
)
from bot.services.inbound_rules import InboundPolicy
from bot.services.private_members import PrivateMembers
from bot.texts import ChatLocales, text

log = logging.getLogger("tgbot.inbound")

TOLD_NOT_ALLOWED = 10_000
"""Strangers remembered as told that their private chat is not allowed (the oldest forgotten
first: one told again after that many others is harmless)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """What the rate limits say about a message that would start work."""

    admitted: bool
    """It starts a turn."""
    refused: bool
    """It would have, but the limits turned it away (stored as refused, answered politely)."""


class InboundGate:
    """The limits and refusals of `bot.services.inbound.InboundService`."""

    def __init__(
        self,
        *,
        policy: InboundPolicy,
        messenger: Messenger,
        locales: ChatLocales,
        limits: RateLimits | None = None,
        members: PrivateMembers | None = None,
    ) -> None:
        self.policy = policy
        self.members = members
        """Who counts as a member under `private_chats = "members"`; None: nobody does
        (only the owner's private chat is let in)."""
        self.messenger = messenger
        self.locales = locales
        self._told_not_allowed: OrderedDict[int, None] = OrderedDict()
        """Members told once that their private chat is not allowed, the newest
        `TOLD_NOT_ALLOWED` of them (a flood of strangers cannot grow it)."""
        self.limiter = RateLimiter(
            per_user=policy.user_messages_per_minute, per_chat=policy.chat_messages_per_minute
        )
        self.limits: RateLimits = limits or LocalRateLimits(self.limiter)
        """In this process (`limiter`), or shared by the workers of one PostgreSQL database."""

    async def allowed(self, message: InboundMessage) -> bool:
        """The allow-list and private-chat policy; a channel's direct-messages chat is a
        one-to-one conversation with its sender. Under `members`, a one-to-one chat is let
        in when its member is one of an allowed group (`PrivateMembers`)."""
        direct_with = message.sender.id if message.direct_messages else None
        policy = self.policy
        if not chat_allowed(
            message.chat_id,
            policy.allowed_chats,
            policy.owner_id,
            policy.private_chats,
            direct_with=direct_with,
        ):
            return False
        if (
            self.members is not None
            and message.chat_id < 0
            and direct_with is None  # a channel's direct messages are no group
            and message.sender.kind == "user"
        ):
            self.members.saw(message.chat_id, message.sender.id)
        user = membership_to_check(
            message.chat_id, policy.owner_id, policy.private_chats, direct_with=direct_with
        )
        if user is None:
            return True
        return self.members is not None and await self.members.is_member(user)

    async def admission(
        self, message: InboundMessage, session: SessionInfo, *, answer: bool
    ) -> Admission:
        """Closed: the bot was removed from the chat; what was said is stored, nothing is
        sent. The limit is checked before storing, so a refusal is stored as one (and crash
        recovery never answers it)."""
        wanted = answer and not session.closed
        admitted = wanted and await self.within_limits(message)
        return Admission(admitted=admitted, refused=wanted and not admitted)

    async def admit(self, message: InboundMessage) -> bool:
        """Whether the sender may start work now (the owner always); a refusal is sent at
        most once per chat a minute."""
        if await self.within_limits(message):
            return True
        await self.refuse(message)
        return False

    async def within_limits(self, message: InboundMessage) -> bool:
        """Whether the sender may start work now (the owner always: a rule, so it holds on
        every worker); counts it if so."""
        if is_owner(message.sender, self.policy.owner_id):
            return True
        return await self.limits.take(user_id=message.sender.id, chat_id=message.chat_id)

    async def refuse_private_chat(self, message: InboundMessage) -> None:
        """A member whose private chat is not allowed is told so once (per process), with
        their user id to pass on to the owner; groups not allowed hear nothing."""
        if message.chat_type != "private" or message.sender.kind != "user":
            return
        told = self._told_not_allowed
        if message.sender.id in told:
            return
        told[message.sender.id] = None
        if len(told) > TOLD_NOT_ALLOWED:
            told.popitem(last=False)
        await self.messenger.send_text(
            message.chat_id,
            text(
                self.locales.for_message(message), "private_not_allowed", user_id=message.sender.id
            ),
        )

    async def refuse(self, message: InboundMessage) -> None:
        """Log a refusal and tell the chat, at most once a minute."""
        log.info("rate limit: %s in chat %s", message.sender.id, message.chat_id)
        if await self.limits.warn_once(message.chat_id):
            await self.messenger.send_text(
                message.chat_id,
                text(self.locales.for_message(message), "rate_limited"),
                thread_id=message.thread_id,
                reply_to=message.message_id,
            )
