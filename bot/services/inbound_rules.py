"""The pure rules of the inbound path: whether a message is answered, what it is stored as.

Whether a message is answered (`should_answer`, one pure rule for live messages and crash
recovery): never a bot (two bots could talk forever), never a service message; in a private
chat every other message; in a group only a message that addresses the bot: a mention, a
reply to one of its messages, or a command, each as the `AnswerRules` allow. The facts come
from a live message (`facts_of_message`: the platform told us about mentions, reply targets
and commands) or from a stored one after a crash (`facts_of_record`: the mention's entity is
gone, so the text is searched for `@username`; the quote's sender is compared with the bot's
id; a command is text starting with `/`).

What a message becomes in storage: its session's scene and title (`scene_of`,
`session_title_of`), its record (`record_of`) and its platform message
(`platform_message_of`).

Crash recovery (`recovery.CrashRecovery`) answers by the same `should_answer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bot.agent.chat_scope import ChatScope
from bot.context.projection import record_tokens
from bot.domain.facts import InboundMessage, Sender
from bot.domain.ids import Locale, Scene, SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import RecordBody, ServiceMessageRecord, StoredRecord, UserRecord
from bot.ports import NewRecord
from bot.services.guard import PrivateChats

# ------------------------------------------------------------------ whether a message is answered


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerRules:
    """Which ways of addressing the bot in a group it answers."""

    on_mention: bool = True
    on_reply: bool = True
    on_command: bool = True
    answer_bots: bool = False
    """Another bot's message may address the bot (`[triggers] answer_bots`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BotIdentity:
    """Who the bot is on the platform (`None` when not known yet)."""

    id: int | None
    username: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageFacts:
    """What the rule looks at in a message."""

    from_bot: bool
    service: bool = False
    mentions_bot: bool = False
    replies_to_bot: bool = False
    command: bool = False
    wake_word: bool = False
    """It holds one of the chat's `keywords` or matches one of its `patterns`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundPolicy:
    """What the inbound path is set to: who owns the bot, which chats it serves, how it
    answers in groups, its merge window and its rate limits."""

    owner_id: int | None
    locale: Locale = "zh"
    answer_on_mention: bool = True
    answer_on_reply: bool = True
    answer_on_command: bool = True
    merge_window_seconds: float = 1.5
    allowed_chats: tuple[int, ...] = ()
    private_chats: PrivateChats = "allow"
    user_messages_per_minute: int = 20
    chat_messages_per_minute: int = 60

    @property
    def rules(self) -> AnswerRules:
        return AnswerRules(
            on_mention=self.answer_on_mention,
            on_reply=self.answer_on_reply,
            on_command=self.answer_on_command,
        )


def should_answer(facts: MessageFacts, scene: Scene, rules: AnswerRules) -> bool:
    if facts.service or (facts.from_bot and not rules.answer_bots):
        return False
    if scene != "group":
        return True
    return (
        (rules.on_mention and facts.mentions_bot)
        or (rules.on_reply and facts.replies_to_bot)
        or (rules.on_command and facts.command)
        or facts.wake_word
    )


Trigger = Literal[
    "mention",
    "reply",
    "command",
    "wake_word",
    "private",
    "owner",
    "ambient",
    "edit",
    "retry",
    "recovery",
    "job",
]
"""What started a turn, as its log line says (`job`: a scheduled task's turn)."""


def trigger_of(message: InboundMessage, scene: Scene) -> Trigger:
    """What makes a scheduled message's turn: in a private chat the chat itself (the
    owner's, or a member's); in a group how the message addressed the bot (a mention, a
    reply, a command), else one of the chat's wake words (ambient turns say so themselves)."""
    if scene != "group":
        return "owner" if scene == "owner" else "private"
    if message.mentions_bot:
        return "mention"
    if message.replies_to_bot:
        return "reply"
    if message.command is not None:
        return "command"
    return "wake_word"


def scope_rules(scope: ChatScope) -> AnswerRules:
    """The answer rules of a chat's (or topic's) triggers."""
    triggers = scope.triggers
    return AnswerRules(
        on_mention=triggers.on_mention,
        on_reply=triggers.on_reply,
        on_command=triggers.on_command,
        answer_bots=triggers.answer_bots,
    )


def is_bot(sender: Sender) -> bool:
    return sender.kind == "bot"


def facts_of_message(message: InboundMessage) -> MessageFacts:
    """The facts of a message as it arrives."""
    return MessageFacts(
        from_bot=is_bot(message.sender),
        service=message.event is not None,
        mentions_bot=message.mentions_bot,
        replies_to_bot=message.replies_to_bot,
        command=message.command is not None,
    )


def facts_of_record(body: UserRecord, bot: BotIdentity) -> MessageFacts:
    """The facts of a stored message, as far as storage kept them."""
    username = bot.username
    return MessageFacts(
        from_bot=is_bot(body.sender),
        mentions_bot=username is not None and f"@{username.lower()}" in body.text.lower(),
        replies_to_bot=body.quote is not None
        and bot.id is not None
        and body.quote.sender_id == bot.id,
        command=body.text.startswith("/"),
    )


# ------------------------------------------------------------------ what a message is stored as


def last_member_record(records: Sequence[StoredRecord]) -> StoredRecord | None:
    """The newest record of a member's message in `records` (oldest first), if any."""
    return next((r for r in reversed(records) if isinstance(r.body, UserRecord)), None)


def last_answered_of(records: Sequence[StoredRecord], sender_id: int) -> StoredRecord | None:
    """The newest message of `sender_id` that the bot answered: a reply answers the newest
    member message before it (as the turn that wrote it did)."""
    trigger: StoredRecord | None = None
    answered: StoredRecord | None = None
    for record in records:
        if isinstance(record.body, UserRecord):
            trigger = record
        elif record.body.kind == "assistant" and trigger is not None:
            assert isinstance(trigger.body, UserRecord)
            if trigger.body.sender.id == sender_id:
                answered = trigger
    return answered


def scene_of(message: InboundMessage, owner_id: int | None) -> Scene:
    if message.chat_type == "private":
        return "owner" if owner_id is not None and message.sender.id == owner_id else "private"
    return "group"


def record_of(message: InboundMessage, *, merged: bool, refused: bool = False) -> NewRecord:
    """The record of a new (or edited) message; `merged` marks a later message of a burst
    that joins the turn of the one before, `refused` one the rate limit turned away."""
    body = _body(message, merged=merged, refused=refused)
    return NewRecord(
        body=body,
        created_at=message.date,
        message_ids=(message.message_id,),
        tokens=record_tokens(body),
    )


def session_title_of(message: InboundMessage) -> str | None:
    """The title a message gives its session: the chat's title, or in a forum topic the
    topic's name (`None` when this message does not show it: the stored one stays)."""
    if message.thread_id:
        return message.topic_name
    return message.chat_title


def platform_message_of(
    message: InboundMessage, *, known: PlatformMessage | None = None
) -> PlatformMessage:
    """The message as a platform message; for an edit, `known` (the stored one) keeps its
    first date and its record."""
    return PlatformMessage(
        chat_id=message.chat_id,
        thread_id=message.thread_id,
        message_id=message.message_id,
        sender_id=message.sender.id,
        sender_name=message.sender.name,
        is_bot=message.sender.is_bot,
        date=known.date if known is not None else message.date,
        text=message.text if message.event is None else message.event,
        media=message.media,
        reply_to_message_id=message.quote.id
        if message.quote is not None and message.quote.id
        else None,
        record_id=known.record_id if known is not None else None,
        edited_at=message.edit_date if message.is_edit else None,
    )


def _body(message: InboundMessage, *, merged: bool, refused: bool) -> RecordBody:
    if message.event is not None:
        return ServiceMessageRecord(text=message.event, actor=message.sender)
    return UserRecord(
        sender=message.sender,
        text=message.text,
        media=message.media,
        quote=message.quote,
        forward=message.forward,
        merged=merged,
        album=message.media_group_id,
        linked_channel=message.automatic_forward,
        refused=refused,
        paid_stars=message.paid_stars,
    )


def key_of(message: InboundMessage) -> SessionKey:
    return SessionKey(chat_id=message.chat_id, thread_id=message.thread_id)
