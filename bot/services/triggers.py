"""Whether a message is one the bot answers: one pure rule for live messages and recovery.

The rule (`should_answer`): never a bot (two bots could talk forever), never a service
message; in a private chat every other message; in a group only a message that addresses
the bot: a mention, a reply to one of its messages, or a command, each as the
`AnswerRules` allow. The facts come from a live message (`facts_of_message`: the platform
told us about mentions, reply targets and commands) or from a stored one after a crash
(`facts_of_record`: the mention's entity is gone, so the text is searched for `@username`;
the quote's sender is compared with the bot's id; a command is text starting with `/`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.facts import InboundMessage, Sender
from bot.domain.ids import Scene
from bot.domain.records import UserRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerRules:
    """Which ways of addressing the bot in a group it answers."""

    on_mention: bool = True
    on_reply: bool = True
    on_command: bool = True


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


def should_answer(facts: MessageFacts, scene: Scene, rules: AnswerRules) -> bool:
    if facts.from_bot or facts.service:
        return False
    if scene != "group":
        return True
    return (
        (rules.on_mention and facts.mentions_bot)
        or (rules.on_reply and facts.replies_to_bot)
        or (rules.on_command and facts.command)
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
