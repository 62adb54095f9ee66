"""Replies to what lies outside the chat: a message of another chat or topic
(`external_quote`) and a story (`story_quote`), read as the `Quote` the model sees."""

from __future__ import annotations

from datetime import datetime

from aiogram.types import (
    ExternalReplyInfo,
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Story,
)

from adapters.telegram.message_parts import chat_name_of, media_of
from adapters.telegram.text_units import Locale, summarize
from bot.domain.facts import Media, Quote
from bot.texts import in_locale

MessageOrigin = (
    MessageOriginUser | MessageOriginHiddenUser | MessageOriginChat | MessageOriginChannel
)


def external_quote(
    msg: Message, ext: ExternalReplyInfo, selected: str | None, *, sent: datetime, locale: Locale
) -> Quote:
    """A reply to a message in another chat (or topic): named, with the content it carried;
    `sent` is when the original was sent."""
    origin = ext.origin
    summary, truncated = summarize(selected or "", media_of(ext), locale)
    chat = ext.chat
    message_id = ext.message_id
    if chat is None and isinstance(origin, MessageOriginChannel):
        chat, message_id = origin.chat, message_id or origin.message_id
    same_chat = chat is not None and chat.id == msg.chat.id
    if same_chat:
        chat_name = None  # another topic of this chat: our ids still mean the same
    elif chat is not None:
        chat_name = f"@{chat.username}" if chat.username and not chat.title else chat_name_of(chat)
    else:
        chat_name = in_locale(locale, zh="另一个聊天", en="another chat")
    return Quote(
        id=message_id or 0,
        sender_id=_origin_id(origin),
        timestamp=sent,
        summary=summary,
        truncated=truncated,
        chat_id=chat.id if chat is not None else None,
        fragment=selected is not None,
        chat_name=chat_name,
    )


def story_quote(story: Story, locale: Locale) -> Quote:
    """A reply to a story: no message of any chat, so no message id (0); the story's
    chat is named on the quote line, its placeholder is the summary."""
    summary, truncated = summarize("", (Media(kind="story"),), locale)
    return Quote(
        id=0,
        summary=summary,
        truncated=truncated,
        chat_id=story.chat.id,
        chat_name=chat_name_of(story.chat),
        story=story.id,
    )


def _origin_id(origin: MessageOrigin) -> int | None:
    match origin:
        case MessageOriginUser():
            return origin.sender_user.id
        case MessageOriginChat():
            return origin.sender_chat.id
        case MessageOriginChannel():
            return origin.chat.id
        case _:
            return None
