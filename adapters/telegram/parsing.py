"""Pure parsing of Bot API updates into `InboundMessage` facts (no network, never raises)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, cast

from aiogram.types import (
    Chat,
    ExternalReplyInfo,
    InaccessibleMessage,
    Message,
    MessageEntity,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    Update,
    User,
)

from adapters.telegram.placeholders import Locale, summarize
from adapters.telegram.text_units import utf16_slice
from bot.domain.facts import Forward, InboundMessage, Media, Quote, Sender

logger = logging.getLogger(__name__)

ChatType = Literal["private", "group", "supergroup", "channel"]
_CHAT_TYPES: frozenset[str] = frozenset({"private", "group", "supergroup", "channel"})

MessageOrigin = (
    MessageOriginUser | MessageOriginHiddenUser | MessageOriginChat | MessageOriginChannel
)

# Content types that are conversation content; any other content type is a service message.
_CONTENT_TYPES: frozenset[str] = frozenset(
    {
        "text", "audio", "animation", "document", "game", "photo", "sticker", "story", "video",
        "video_note", "voice", "contact", "dice", "poll", "venue", "location", "invoice",
        "giveaway", "giveaway_winners", "paid_media", "checklist", "live_photo", "unknown",
    }
)  # fmt: skip


def parse_update(
    update: Update, *, bot_id: int, bot_username: str | None, locale: Locale
) -> InboundMessage | None:
    """The message an update carries, or `None` for updates we ignore or cannot read.

    Never raises: an error inside becomes `None` and a logged warning.
    """
    try:
        return parse_update_strict(update, bot_id=bot_id, bot_username=bot_username, locale=locale)
    except Exception:
        logger.warning("could not parse update %s", update.update_id, exc_info=True)
        return None


def parse_raw_update(
    data: Mapping[str, Any], *, bot_id: int, bot_username: str | None, locale: Locale
) -> InboundMessage | None:
    """`parse_update` for a raw Bot API update dict; invalid JSON shapes give `None`."""
    try:
        update = Update.model_validate(dict(data))
    except Exception:
        logger.warning("invalid update %s", data.get("update_id"), exc_info=True)
        return None
    return parse_update(update, bot_id=bot_id, bot_username=bot_username, locale=locale)


def parse_update_strict(
    update: Update, *, bot_id: int, bot_username: str | None, locale: Locale
) -> InboundMessage | None:
    """`parse_update` that lets errors propagate (for callers that report them)."""
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
        text = msg.text or msg.caption or ""
        if not text and msg.poll is not None:
            text = msg.poll.question
        entities = msg.entities if msg.text else msg.caption_entities
        return InboundMessage(
            update_id=update_id,
            chat_id=msg.chat.id,
            chat_type=_chat_type(msg.chat),
            chat_title=msg.chat.title,
            thread_id=(msg.message_thread_id or 0) if msg.is_topic_message else 0,
            message_id=msg.message_id,
            date=_utc(msg.date),
            sender=sender,
            text=text,
            media=media_of(msg),
            media_group_id=msg.media_group_id,
            quote=self.quote(msg, reply),
            forward=forward_of(msg.forward_origin),
            is_edit=is_edit,
            edit_date=_from_unix(msg.edit_date) if msg.edit_date else None,
            mentions_bot=self._mentions_bot(text, entities or ()),
            replies_to_bot=bool(
                reply and reply.from_user is not None and reply.from_user.id == self.bot_id
            ),
            command=self._command(text, entities or ()),
            event=self.event(msg, sender.name),
        )

    def quote(self, msg: Message, reply: Message | None) -> Quote | None:
        selected = msg.quote.text if msg.quote is not None else None
        manual = bool(msg.quote is not None and msg.quote.is_manual)
        if reply is not None:
            if selected is not None:
                summary, truncated = summarize(selected, (), self.locale)
            else:
                summary, truncated = summarize(_body(reply), media_of(reply), self.locale)
            return Quote(
                id=reply.message_id,
                sender_id=sender_of(reply).id,
                timestamp=_utc(reply.date),
                summary=summary,
                truncated=truncated,
                chat_id=msg.chat.id,
                is_manual=manual,
            )
        if msg.external_reply is not None:
            return self._external_quote(msg.external_reply, selected, manual)
        return None

    def _external_quote(self, ext: ExternalReplyInfo, selected: str | None, manual: bool) -> Quote:
        origin = ext.origin
        summary, truncated = summarize(selected or "", media_of(ext), self.locale)
        message_id = ext.message_id
        chat_id = ext.chat.id if ext.chat is not None else None
        if isinstance(origin, MessageOriginChannel):
            message_id = message_id or origin.message_id
            chat_id = chat_id or origin.chat.id
        return Quote(
            id=message_id or 0,
            sender_id=_origin_id(origin),
            timestamp=_utc(origin.date),
            summary=summary,
            truncated=truncated,
            chat_id=chat_id,
            is_manual=manual,
        )

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

    def event(self, msg: Message, actor: str) -> str | None:
        return describe_service(msg, actor, self.locale)


# ---------------------------------------------------------------- senders and origins


def sender_of(msg: Message) -> Sender:
    """Who wrote `msg`: a user, a bot, an anonymous admin (sender_chat is the chat) or a channel."""
    chat = msg.sender_chat
    if chat is not None:
        kind: Literal["anonymous_admin", "channel"] = (
            "anonymous_admin" if chat.id == msg.chat.id and chat.type != "channel" else "channel"
        )
        return Sender(id=chat.id, name=chat_name(chat), username=chat.username, kind=kind)
    user = msg.from_user
    if user is not None:
        return user_sender(user)
    if msg.chat.type == "channel":
        return Sender(
            id=msg.chat.id, name=chat_name(msg.chat), username=msg.chat.username, kind="channel"
        )
    return Sender(id=0, name="")


def user_sender(user: User) -> Sender:
    return Sender(
        id=user.id,
        name=user_name(user),
        username=user.username,
        is_bot=user.is_bot,
        kind="bot" if user.is_bot else "user",
    )


def user_name(user: User) -> str:
    full = " ".join(part for part in (user.first_name, user.last_name) if part)
    return full.strip() or (user.username or str(user.id))


def chat_name(chat: Chat) -> str:
    if chat.title:
        return chat.title
    full = " ".join(part for part in (chat.first_name, chat.last_name) if part).strip()
    return full or chat.username or str(chat.id)


def forward_of(origin: object) -> Forward | None:
    """Where a forwarded message came from; one level only."""
    match origin:
        case MessageOriginUser(sender_user=user, date=date):
            return Forward(from_name=user_name(user), from_id=user.id, date=_utc(date))
        case MessageOriginHiddenUser(sender_user_name=name, date=date):
            return Forward(from_name=name, hidden=True, date=_utc(date))
        case MessageOriginChat(sender_chat=chat, date=date):
            return Forward(from_name=chat_name(chat), from_id=chat.id, date=_utc(date))
        case MessageOriginChannel(chat=chat, date=date):
            return Forward(from_name=chat_name(chat), from_id=chat.id, date=_utc(date))
        case _:
            return None


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


# ---------------------------------------------------------------- content


def media_of(msg: Message | ExternalReplyInfo) -> tuple[Media, ...]:
    """The media facts of a message (or of an external reply's content)."""
    if msg.photo:
        return (Media(kind="photo", file_id=msg.photo[-1].file_id),)
    if msg.voice is not None:
        v = msg.voice
        return (Media(kind="voice", duration=v.duration, file_id=v.file_id),)
    if msg.video_note is not None:
        n = msg.video_note
        return (Media(kind="video_note", duration=n.duration, file_id=n.file_id),)
    if msg.animation is not None:  # before document: GIFs carry both fields
        a = msg.animation
        return (
            Media(kind="animation", duration=a.duration, file_name=a.file_name, file_id=a.file_id),
        )
    if msg.video is not None:
        w = msg.video
        return (Media(kind="video", duration=w.duration, file_name=w.file_name, file_id=w.file_id),)
    if msg.audio is not None:
        au = msg.audio
        name = au.file_name or " - ".join(p for p in (au.performer, au.title) if p) or None
        return (Media(kind="audio", duration=au.duration, file_name=name, file_id=au.file_id),)
    if msg.document is not None:
        d = msg.document
        return (Media(kind="document", file_name=d.file_name, file_id=d.file_id),)
    if msg.sticker is not None:
        s = msg.sticker
        return (Media(kind="sticker", emoji=s.emoji, file_id=s.file_id),)
    if msg.location is not None or msg.venue is not None:
        return (Media(kind="location"),)
    if msg.contact is not None:
        return (Media(kind="contact"),)
    if msg.poll is not None:
        return (Media(kind="poll"),)
    if msg.dice is not None:
        return (Media(kind="other", emoji=msg.dice.emoji),)
    if any(x is not None for x in (msg.game, msg.story, msg.invoice, msg.paid_media)):
        return (Media(kind="other"),)
    return ()


def _body(msg: Message) -> str:
    if msg.text or msg.caption:
        return msg.text or msg.caption or ""
    return msg.poll.question if msg.poll is not None else ""


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


# ---------------------------------------------------------------- service messages


def describe_service(msg: Message, actor: str, locale: Locale) -> str | None:
    """A one-line description of a service message, or `None` for ordinary content."""

    def t(zh: str, en: str) -> str:
        return zh if locale == "zh" else en

    if msg.new_chat_members:
        names = ", ".join(user_name(u) for u in msg.new_chat_members)
        joined_alone = len(msg.new_chat_members) == 1 and (
            msg.from_user is None or msg.from_user.id == msg.new_chat_members[0].id
        )
        if joined_alone:
            return t(f"{names} 加入了群组", f"{names} joined the group")
        return t(f"{actor} 邀请 {names} 加入了群组", f"{actor} added {names} to the group")
    if msg.left_chat_member is not None:
        gone = user_name(msg.left_chat_member)
        if msg.from_user is None or msg.from_user.id == msg.left_chat_member.id:
            return t(f"{gone} 离开了群组", f"{gone} left the group")
        return t(f"{actor} 将 {gone} 移出了群组", f"{actor} removed {gone} from the group")
    if msg.new_chat_title is not None:
        title = " ".join(msg.new_chat_title.split())
        return t(f"{actor} 将群名改为「{title}」", f'{actor} changed the group title to "{title}"')
    if msg.pinned_message is not None:
        return _describe_pin(msg.pinned_message, actor, locale)
    if msg.forum_topic_created is not None:
        name = msg.forum_topic_created.name
        return t(f"{actor} 创建了话题「{name}」", f'{actor} created the topic "{name}"')
    if msg.forum_topic_edited is not None:
        if new_name := msg.forum_topic_edited.name:
            return t(
                f"{actor} 将话题改名为「{new_name}」", f'{actor} renamed the topic to "{new_name}"'
            )
        return t(f"{actor} 编辑了话题", f"{actor} edited the topic")
    simple = _SIMPLE_EVENTS.get(msg.content_type)
    if simple is not None:
        zh, en = simple
        return t(f"{actor} {zh}", f"{actor} {en}")
    if msg.content_type not in _CONTENT_TYPES:
        return t(f"[服务消息 {msg.content_type}]", f"[service message {msg.content_type}]")
    return None


_SIMPLE_EVENTS: dict[str, tuple[str, str]] = {
    "new_chat_photo": ("更换了群头像", "changed the group photo"),
    "delete_chat_photo": ("删除了群头像", "deleted the group photo"),
    "group_chat_created": ("创建了群组", "created the group"),
    "supergroup_chat_created": ("创建了超级群组", "created the supergroup"),
    "channel_chat_created": ("创建了频道", "created the channel"),
    "forum_topic_closed": ("关闭了话题", "closed the topic"),
    "forum_topic_reopened": ("重新开启了话题", "reopened the topic"),
    "video_chat_started": ("开始了语音聊天", "started a video chat"),
    "video_chat_ended": ("结束了语音聊天", "ended the video chat"),
    "video_chat_scheduled": ("预约了语音聊天", "scheduled a video chat"),
    "migrate_to_chat_id": ("将群组升级为超级群组", "upgraded the group to a supergroup"),
    "migrate_from_chat_id": ("将群组升级为超级群组", "upgraded the group to a supergroup"),
    "message_auto_delete_timer_changed": ("修改了自动删除计时", "changed the auto-delete timer"),
}


def _describe_pin(pinned: Message | InaccessibleMessage, actor: str, locale: Locale) -> str:
    if isinstance(pinned, Message):
        summary, _ = summarize(_body(pinned), media_of(pinned), locale)
    else:
        summary = ""
    mid = pinned.message_id
    if locale == "zh":
        return f"{actor} 置顶了消息 #{mid}" + (f"：{summary}" if summary else "")
    return f"{actor} pinned message #{mid}" + (f": {summary}" if summary else "")


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
