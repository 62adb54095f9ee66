"""Pure parsing of Bot API updates into `InboundMessage` facts (no network, never raises)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, cast

from aiogram.types import (
    Chat,
    Message,
    MessageEntity,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Story,
    Update,
)

from adapters.telegram.message_parts import chat_name_of, media_of, sender_of, user_name
from adapters.telegram.outside_quotes import external_quote, story_quote
from adapters.telegram.rich_messages import rich_text
from adapters.telegram.service_parsing import describe_service
from adapters.telegram.suggested_posts import suggested_post_fact
from adapters.telegram.text_units import Locale, one_line, summarize, utf16_slice, with_meaning
from bot.domain.facts import Forward, InboundMessage, Media, Quote
from bot.texts import in_locale

ChatType = Literal["private", "group", "supergroup", "channel"]
_CHAT_TYPES: frozenset[str] = frozenset({"private", "group", "supergroup", "channel"})


def parse_update_strict(
    update: Update, *, bot_id: int, bot_username: str | None, locale: Locale
) -> InboundMessage | None:
    """The message an update carries, or `None` for updates we ignore; errors propagate
    (the caller reports them and retries what is transient)."""
    reader = _Reader(bot_id=bot_id, bot_username=bot_username, locale=locale)
    if update.message is not None:
        return reader.message(update.message, update_id=update.update_id, is_edit=False)
    if update.edited_message is not None:
        return reader.message(update.edited_message, update_id=update.update_id, is_edit=True)
    if update.channel_post is not None:
        return reader.message(update.channel_post, update_id=update.update_id, is_edit=False)
    if update.edited_channel_post is not None:
        return reader.message(update.edited_channel_post, update_id=update.update_id, is_edit=True)
    return None


class _Reader:
    """Holds the per-bot parameters while one message is read."""

    def __init__(self, *, bot_id: int, bot_username: str | None, locale: Locale) -> None:
        self.bot_id = bot_id
        self.bot_username = bot_username.lstrip("@").lower() if bot_username else None
        self.locale = locale

    def message(self, msg: Message, *, update_id: int | None, is_edit: bool) -> InboundMessage:
        sender = sender_of(msg)
        reply = _explicit_reply(msg)
        text = msg.text or msg.caption or rich_text(msg)
        entities = msg.entities if msg.text else msg.caption_entities
        event, media = self._content(msg, sender.name)
        if not text and not media and event is None:
            media = (Media(kind="unknown"),)  # every message renders as something
        return InboundMessage(
            update_id=update_id,
            chat_id=msg.chat.id,
            chat_type=_chat_type(msg.chat),
            direct_messages=bool(msg.chat.is_direct_messages),
            chat_title=msg.chat.title,
            thread_id=thread_of(msg),
            message_id=msg.message_id,
            date=_utc(msg.date),
            sender=sender,
            text=with_meaning(text, entities),
            media=media,
            media_group_id=msg.media_group_id,
            automatic_forward=bool(msg.is_automatic_forward),
            topic_name=topic_name_of(msg),
            topic_first_name=topic_first_name_of(msg) or self._direct_messages_title(msg),
            quote=self.quote(msg, reply),
            forward=forward_of(msg),
            is_edit=is_edit,
            edit_date=_from_unix(msg.edit_date) if msg.edit_date else None,
            mentions_bot=self._mentions_bot(text, entities or ()),
            replies_to_bot=bool(
                reply and reply.from_user is not None and reply.from_user.id == self.bot_id
            ),
            command=self._command(text, entities or ()),
            event=event,
            language_code=msg.from_user.language_code if msg.from_user is not None else None,
            chat_migration=_chat_migration(msg),
            # Bot API 9.x fields, read only when this aiogram has them
            paid_stars=getattr(msg, "paid_star_count", None) or None,
        )

    def _content(self, msg: Message, actor: str) -> tuple[str | None, tuple[Media, ...]]:
        """The service event and the media of `msg`. A text message is no service message
        (its content type is text), so the most common message skips that reading; any
        message may be a suggested post."""
        event = None if msg.text else describe_service(msg, actor, self.locale)
        media = media_of(msg)
        if msg.suggested_post_info is not None:
            media += suggested_post_fact(msg, self.locale)
        return event, media

    def _direct_messages_title(self, msg: Message) -> str | None:
        """A channel's direct-messages topic is named for the user it is with."""
        topic = msg.direct_messages_topic
        if topic is None or topic.user is None:
            return None
        name = user_name(topic.user)
        return in_locale(self.locale, zh=f"与 {name} 的私信", en=f"direct messages with {name}")

    def quote(self, msg: Message, reply: Message | None) -> Quote | None:
        selected = msg.quote.text if msg.quote is not None and msg.quote.text else None
        if reply is not None:
            task_id, task_text = _checklist_task(msg, reply)
            if selected is None:
                selected = task_text  # the task replied to is the part of the message meant
            if selected is not None:
                summary, truncated = summarize(selected, (), self.locale)
            else:
                summary, truncated = self._content_summary(reply)
            forward = forward_of(reply)
            # a message Telegram no longer shows (InaccessibleMessage: no sender, date 0) has
            # neither, rather than user 0 on 1970-01-01
            sent = _utc(reply.date)
            return Quote(
                id=reply.message_id,
                sender_id=sender_of(reply).id or None,
                timestamp=sent if sent.timestamp() > 0 else None,
                summary=summary,
                truncated=truncated,
                chat_id=msg.chat.id,
                fragment=selected is not None,
                forwarded_from=forward.from_name if forward is not None else None,
                task=task_id,
            )
        if msg.external_reply is not None:
            ext = msg.external_reply
            sent = _utc(ext.origin.date)
            return external_quote(msg, ext, selected, sent=sent, locale=self.locale)
        story = getattr(msg, "reply_to_story", None)
        if isinstance(story, Story):
            return story_quote(story, self.locale)
        return None

    def _content_summary(self, msg: Message) -> tuple[str, bool]:
        media = media_of(msg)
        body = msg.text or msg.caption or ""
        if not body and not media:
            # a service message (pin, giveaway created…) quotes as its description
            body = describe_service(msg, sender_of(msg).name, self.locale) or ""
        return summarize(body, media, self.locale)

    def _mentions_bot(self, text: str, entities: tuple[MessageEntity, ...] | list[Any]) -> bool:
        for entity in entities:
            if entity.type == "text_mention" and entity.user and entity.user.id == self.bot_id:
                return True
            if entity.type == "mention" and self.bot_username:
                name = utf16_slice(text, entity.offset, entity.length)
                if name.lstrip("@").lower() == self.bot_username:
                    return True
        return False

    def _command(self, text: str, entities: tuple[MessageEntity, ...] | list[Any]) -> str | None:
        for entity in entities:
            if entity.type != "bot_command" or entity.offset != 0:
                continue
            name, _, target = utf16_slice(text, 0, entity.length).lstrip("/").partition("@")
            if target and target.lower() != self.bot_username:
                return None  # addressed to another bot (or we do not know our own name)
            return name.lower() or None
        return None


# ---------------------------------------------------------------- origins


def forward_of(msg: Message) -> Forward | None:
    """Where a forwarded message came from, one level only.

    `forward_origin` first; the legacy fields (`forward_from`, `forward_from_chat`,
    `forward_sender_name`, older servers and replayed logs) map to the same fact.
    """
    match msg.forward_origin:
        case MessageOriginUser(sender_user=user, date=date):
            return Forward(from_name=user_name(user), from_id=user.id, date=_utc(date))
        case MessageOriginHiddenUser(sender_user_name=name, date=date):
            return Forward(from_name=one_line(name), hidden=True, date=_utc(date))
        case MessageOriginChat(sender_chat=chat, date=date, author_signature=signature):
            name = _signed(chat_name_of(chat), signature)
            return Forward(from_name=name, from_id=chat.id, date=_utc(date))
        case MessageOriginChannel(chat=chat, date=date, author_signature=signature):
            name = _signed(chat_name_of(chat), signature)
            return Forward(from_name=name, from_id=chat.id, date=_utc(date))
    when = _utc(msg.forward_date) if msg.forward_date else None
    if msg.forward_from is not None:
        user = msg.forward_from
        return Forward(from_name=user_name(user), from_id=user.id, date=when)
    if msg.forward_from_chat is not None:
        chat = msg.forward_from_chat
        name = _signed(chat_name_of(chat), msg.forward_signature)
        return Forward(from_name=name, from_id=chat.id, date=when)
    if msg.forward_sender_name:
        return Forward(from_name=one_line(msg.forward_sender_name), hidden=True, date=when)
    return None


def _signed(name: str, signature: str | None) -> str:
    signature = one_line(signature or "")
    return f"{name} ({signature})" if signature and signature != name else name


def _checklist_task(msg: Message, reply: Message) -> tuple[int | None, str | None]:
    """The checklist task a reply names (`reply_to_checklist_task_id`) and its text, when
    the replied checklist still lists it."""
    task_id = getattr(msg, "reply_to_checklist_task_id", None)
    if not isinstance(task_id, int):
        return None, None
    checklist = reply.checklist
    tasks = checklist.tasks if checklist is not None else []
    text = next((task.text for task in tasks if task.id == task_id and task.text), None)
    return task_id, text


def _explicit_reply(msg: Message) -> Message | None:
    """`reply_to_message`, minus the implicit reply every forum-topic message carries."""
    reply = msg.reply_to_message
    if reply is None:
        return None
    if msg.is_topic_message and (
        reply.forum_topic_created is not None or reply.message_id == msg.message_thread_id
    ):
        return None
    return reply


def topic_name_of(msg: Message) -> str | None:
    """The topic's name when this message creates or renames it, else `None`."""
    if msg.forum_topic_created is not None:
        return one_line(msg.forum_topic_created.name) or None
    if msg.forum_topic_edited is not None and msg.forum_topic_edited.name:
        return one_line(msg.forum_topic_edited.name) or None
    return None


def thread_of(msg: Message) -> int:
    """The conversation inside the chat: a forum topic's thread id, a channel's
    direct-messages topic (Bot API 9.2 `direct_messages_topic.topic_id`), else 0."""
    if msg.direct_messages_topic is not None:
        return msg.direct_messages_topic.topic_id
    return (msg.message_thread_id or 0) if msg.is_topic_message else 0


def topic_first_name_of(msg: Message) -> str | None:
    """The name the topic was created with, from a topic message's implicit reply."""
    reply = msg.reply_to_message
    if msg.is_topic_message and reply is not None and reply.forum_topic_created is not None:
        return one_line(reply.forum_topic_created.name) or None
    return None


# ---------------------------------------------------------------- small helpers


def _chat_type(chat: Chat) -> ChatType:
    return cast(ChatType, chat.type) if chat.type in _CHAT_TYPES else "group"


def _utc(value: datetime | int) -> datetime:
    if isinstance(value, int):
        return _from_unix(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _from_unix(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _chat_migration(msg: Message) -> tuple[int, int] | None:
    """(old chat id, new chat id) when `msg` says a group became a supergroup."""
    if msg.migrate_from_chat_id is not None:
        return msg.migrate_from_chat_id, msg.chat.id
    if msg.migrate_to_chat_id is not None:
        return msg.chat.id, msg.migrate_to_chat_id
    return None
