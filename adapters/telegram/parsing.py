"""Pure parsing of Bot API updates into `InboundMessage` facts (no network, never raises)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal, cast

from aiogram.types import (
    Chat,
    ExternalReplyInfo,
    GiveawayWinners,
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

from adapters.telegram.quote_summaries import Locale, one_line, summarize
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
        "rich_message",
    }
)  # fmt: skip

# Where coordinates are cut: 3 decimals is about 100 m, enough to say where, not a doorstep.
COORDINATE_DECIMALS = 3


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
        entities = msg.entities if msg.text else msg.caption_entities
        event = describe_service(msg, sender.name, self.locale)
        media = media_of(msg)
        if not text and not media and event is None:
            media = (Media(kind="unknown"),)  # every message renders as something
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
            media=media,
            media_group_id=msg.media_group_id,
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
        )

    def quote(self, msg: Message, reply: Message | None) -> Quote | None:
        selected = msg.quote.text if msg.quote is not None and msg.quote.text else None
        if reply is not None:
            if selected is not None:
                summary, truncated = summarize(selected, (), self.locale)
            else:
                summary, truncated = self._content_summary(reply)
            forward = forward_of(reply)
            return Quote(
                id=reply.message_id,
                sender_id=sender_of(reply).id,
                timestamp=_utc(reply.date),
                summary=summary,
                truncated=truncated,
                chat_id=msg.chat.id,
                fragment=selected is not None,
                forwarded_from=forward.from_name if forward is not None else None,
            )
        if msg.external_reply is not None:
            return self._external_quote(msg, msg.external_reply, selected)
        return None

    def _content_summary(self, msg: Message) -> tuple[str, bool]:
        media = media_of(msg)
        body = msg.text or msg.caption or ""
        if not body and not media:
            # a service message (pin, giveaway created…) quotes as its description
            body = describe_service(msg, sender_of(msg).name, self.locale) or ""
        return summarize(body, media, self.locale)

    def _external_quote(self, msg: Message, ext: ExternalReplyInfo, selected: str | None) -> Quote:
        """A reply to a message in another chat (or topic): named, with the content it carried."""
        origin = ext.origin
        summary, truncated = summarize(selected or "", media_of(ext), self.locale)
        chat = ext.chat
        message_id = ext.message_id
        if chat is None and isinstance(origin, MessageOriginChannel):
            chat, message_id = origin.chat, message_id or origin.message_id
        same_chat = chat is not None and chat.id == msg.chat.id
        if same_chat:
            chat_name = None  # another topic of this chat: our ids still mean the same
        elif chat is not None:
            chat_name = (
                f"@{chat.username}" if chat.username and not chat.title else chat_name_of(chat)
            )
        else:
            chat_name = "另一个聊天" if self.locale == "zh" else "another chat"
        return Quote(
            id=message_id or 0,
            sender_id=_origin_id(origin),
            timestamp=_utc(origin.date),
            summary=summary,
            truncated=truncated,
            chat_id=chat.id if chat is not None else None,
            fragment=selected is not None,
            chat_name=chat_name,
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


# ---------------------------------------------------------------- senders and origins


def sender_of(msg: Message) -> Sender:
    """Who wrote `msg`: a user, a bot, an anonymous admin (sender_chat is the chat) or a channel.

    A channel or an anonymous admin that signs (`author_signature`) keeps the signature in
    its name; `via_bot` records an inline bot the message was sent through.
    """
    via = msg.via_bot
    via_bot = (f"@{via.username}" if via.username else user_name(via)) if via else None
    chat = msg.sender_chat
    if chat is None and msg.from_user is None:
        if msg.chat.type == "private":  # the only other person there wrote it
            name = chat_name_of(msg.chat)
            return Sender(id=msg.chat.id, name=name, username=msg.chat.username, via_bot=via_bot)
        if msg.chat.type == "channel":
            chat = msg.chat
    if chat is not None:
        kind: Literal["anonymous_admin", "channel"] = (
            "anonymous_admin" if chat.id == msg.chat.id and chat.type != "channel" else "channel"
        )
        name = chat_name_of(chat)
        if msg.author_signature and one_line(msg.author_signature) != name:
            name = f"{name} ({one_line(msg.author_signature)})"
        return Sender(id=chat.id, name=name, username=chat.username, kind=kind, via_bot=via_bot)
    user = msg.from_user
    if user is not None:
        return replace(user_sender(user), via_bot=via_bot)
    return Sender(id=0, name="", via_bot=via_bot)


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
    return one_line(full) or (user.username or str(user.id))


def chat_name_of(chat: Chat) -> str:
    """A chat's title, else its person's name, else `@username`, else its id."""
    if chat.title:
        return one_line(chat.title)
    full = one_line(" ".join(part for part in (chat.first_name, chat.last_name) if part))
    return full or (f"@{chat.username}" if chat.username else str(chat.id))


def _known_chat_name(chat: Chat) -> str | None:
    """`chat_name_of` when the chat has a name at all (not just an id)."""
    name = chat_name_of(chat)
    return None if name == str(chat.id) else name


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
    """The media and non-text content of a message (or of an external reply's content)."""
    if msg.live_photo is not None:  # before photo: a live photo carries a still too
        return (Media(kind="live_photo", duration=msg.live_photo.duration),)
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
    return _content_of(msg)


def _content_of(msg: Message | ExternalReplyInfo) -> tuple[Media, ...]:
    """Non-file content: each kind keeps the details people care about."""
    if msg.venue is not None:  # before location: a venue carries a location too
        venue = msg.venue
        return (Media(kind="venue", title=venue.title, detail=venue.address),)
    if msg.location is not None:
        loc = msg.location
        where = f"{loc.latitude:.{COORDINATE_DECIMALS}f}, {loc.longitude:.{COORDINATE_DECIMALS}f}"
        return (Media(kind="location", detail=where),)
    if msg.contact is not None:
        c = msg.contact
        name = " ".join(part for part in (c.first_name, c.last_name) if part)
        return (Media(kind="contact", title=name or None),)
    if msg.poll is not None:
        options = " / ".join(option.text for option in msg.poll.options)
        return (Media(kind="poll", title=msg.poll.question, detail=options or None),)
    if msg.dice is not None:
        return (Media(kind="dice", emoji=msg.dice.emoji, value=msg.dice.value),)
    if msg.checklist is not None:
        tasks = " / ".join(
            ("✓ " if task.completion_date or task.completed_by_user else "") + task.text
            for task in msg.checklist.tasks
        )
        return (Media(kind="checklist", title=msg.checklist.title, detail=tasks or None),)
    if msg.giveaway is not None:
        g = msg.giveaway
        chats = ", ".join(filter(None, (_known_chat_name(chat) for chat in g.chats)))
        return (
            Media(
                kind="giveaway",
                value=g.winner_count,
                title=g.prize_description,
                detail=chats or None,
            ),
        )
    if msg.giveaway_winners is not None:
        return (_winners(msg.giveaway_winners),)
    if msg.game is not None:
        return (Media(kind="game", title=msg.game.title),)
    if msg.invoice is not None:
        return (Media(kind="invoice", title=msg.invoice.title),)
    if msg.story is not None:
        return (Media(kind="story", title=_known_chat_name(msg.story.chat)),)
    if msg.paid_media is not None:
        return (Media(kind="paid_media", value=msg.paid_media.star_count),)
    if isinstance(msg, Message) and msg.rich_message is not None:
        return (Media(kind="unknown"),)
    return ()


def _winners(w: GiveawayWinners) -> Media:
    names = ", ".join(user_name(user) for user in w.winners)
    return Media(kind="giveaway_winners", value=w.winner_count, title=w.prize_description,
                 detail=names or None)  # fmt: skip


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
    """A one-line description of a service message, or `None` for ordinary content.

    Every service content type gets readable words in both locales; a type added after this
    list reads as its name with spaces (`suggested post paid`), never an enum repr.
    """
    kind = _content_type(msg)
    if kind in _CONTENT_TYPES:
        return None
    described = _ServiceWords(msg, actor, locale).describe(kind)
    if described is not None:
        return described
    readable = kind.replace("_", " ")
    if locale == "zh":
        return f"{actor} 发出了服务消息（{readable}）" if actor else f"服务消息（{readable}）"
    return f"{actor}: service message ({readable})" if actor else f"service message ({readable})"


def _content_type(msg: Message) -> str:
    kind = msg.content_type
    value = getattr(kind, "value", kind)
    return str(value)


class _ServiceWords:
    """The words for one service message, in one locale."""

    def __init__(self, msg: Message, actor: str, locale: Locale) -> None:
        self.msg = msg
        self.actor = actor
        self.locale = locale

    def t(self, zh: str, en: str) -> str:
        return zh if self.locale == "zh" else en

    def stars(self, count: int | None) -> str:
        if count is None:
            return ""
        return self.t(f"（{count} 星）", f" ({count} stars)")

    def describe(self, kind: str) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        match kind:
            case "new_chat_members" if msg.new_chat_members:
                names = ", ".join(user_name(u) for u in msg.new_chat_members)
                joined_alone = len(msg.new_chat_members) == 1 and (
                    msg.from_user is None or msg.from_user.id == msg.new_chat_members[0].id
                )
                if joined_alone:
                    return t(f"{names} 加入了群组", f"{names} joined the group")
                return t(f"{a} 邀请 {names} 加入了群组", f"{a} added {names} to the group")
            case "left_chat_member" if msg.left_chat_member is not None:
                gone = user_name(msg.left_chat_member)
                if msg.from_user is None or msg.from_user.id == msg.left_chat_member.id:
                    return t(f"{gone} 离开了群组", f"{gone} left the group")
                return t(f"{a} 将 {gone} 移出了群组", f"{a} removed {gone} from the group")
            case "new_chat_title" if msg.new_chat_title is not None:
                title = one_line(msg.new_chat_title)
                return t(f"{a} 将群名改为「{title}」", f'{a} changed the group title to "{title}"')
            case "pinned_message" if msg.pinned_message is not None:
                return _describe_pin(msg.pinned_message, a, self.locale)
            case "forum_topic_created" if msg.forum_topic_created is not None:
                name = one_line(msg.forum_topic_created.name)
                return t(f"{a} 创建了话题「{name}」", f'{a} created the topic "{name}"')
            case "forum_topic_edited" if msg.forum_topic_edited is not None:
                if new_name := one_line(msg.forum_topic_edited.name or ""):
                    return t(
                        f"{a} 将话题改名为「{new_name}」", f'{a} renamed the topic to "{new_name}"'
                    )
                return t(f"{a} 编辑了话题", f"{a} edited the topic")
            case "chat_owner_left" if msg.chat_owner_left is not None:
                new = msg.chat_owner_left.new_owner
                if new is None:
                    return t(f"群主 {a} 离开了群组", f"the owner {a} left the group")
                owner = user_name(new)
                return t(
                    f"群主 {a} 离开了群组，新群主是 {owner}",
                    f"the owner {a} left the group; {owner} is the new owner",
                )
            case "chat_owner_changed" if msg.chat_owner_changed is not None:
                owner = user_name(msg.chat_owner_changed.new_owner)
                return t(f"群主变更为 {owner}", f"{owner} is now the owner of the group")
            case "message_auto_delete_timer_changed" if msg.message_auto_delete_timer_changed:
                seconds = msg.message_auto_delete_timer_changed.message_auto_delete_time
                if seconds == 0:
                    return t(f"{a} 关闭了消息自动删除", f"{a} turned off auto-delete")
                return t(
                    f"{a} 将消息设为 {seconds} 秒后自动删除",
                    f"{a} set messages to auto-delete after {seconds} s",
                )
            case "migrate_to_chat_id" | "migrate_from_chat_id":
                return t("群组升级为超级群组", "the group was upgraded to a supergroup")
            case "successful_payment" if msg.successful_payment is not None:
                currency = msg.successful_payment.currency
                return t(
                    f"{a} 完成了一笔付款（{currency}）", f"{a} completed a payment ({currency})"
                )
            case "refunded_payment" if msg.refunded_payment is not None:
                currency = msg.refunded_payment.currency
                return t(
                    f"{a} 的付款已退款（{currency}）", f"{a}'s payment was refunded ({currency})"
                )
            case "users_shared" if msg.users_shared is not None:
                shared = msg.users_shared.users or []
                names = ", ".join(_shared_user(u) for u in shared)
                return t(
                    f"{a} 分享了用户 {names}".rstrip(), f"{a} shared users: {names}".rstrip(": ")
                )
            case "chat_shared" if msg.chat_shared is not None:
                c = msg.chat_shared
                name = one_line(c.title or "") or (
                    f"@{c.username}" if c.username else str(c.chat_id)
                )
                return t(f"{a} 分享了聊天「{name}」", f'{a} shared the chat "{name}"')
            case "gift" if msg.gift is not None:
                note = one_line(msg.gift.text or "")
                said = t(f"：{note}", f": {note}") if note else ""
                cost = self.stars(msg.gift.gift.star_count)
                return t(f"{a} 送出了一份礼物{cost}{said}", f"{a} sent a gift{cost}{said}")
            case "unique_gift" if msg.unique_gift is not None:
                g = msg.unique_gift.gift
                name = one_line(f"{g.base_name} #{g.number}")
                return t(f"{a} 送出了收藏礼物 {name}", f"{a} sent the collectible gift {name}")
            case "gift_upgrade_sent":
                return t(f"{a} 升级了一份礼物", f"{a} upgraded a gift")
            case "connected_website" if msg.connected_website:
                site = one_line(msg.connected_website)
                return t(f"{a} 通过机器人登录了 {site}", f"{a} logged in on {site} with the bot")
            case "write_access_allowed":
                return t(f"{a} 允许机器人给自己发消息", f"{a} allowed the bot to message them")
            case "passport_data":
                return t(f"{a} 分享了 Telegram Passport 资料", f"{a} shared Telegram Passport data")
            case "proximity_alert_triggered" if msg.proximity_alert_triggered is not None:
                p = msg.proximity_alert_triggered
                near, watcher = _actor_name(p.traveler), _actor_name(p.watcher)
                return t(
                    f"{near} 距离 {watcher} 不到 {p.distance} 米",
                    f"{near} is within {p.distance} m of {watcher}",
                )
            case "boost_added" if msg.boost_added is not None:
                n = msg.boost_added.boost_count
                return t(f"{a} 为群组助力了 {n} 次", f"{a} boosted the group {n} times")
            case "chat_background_set":
                return t(f"{a} 更换了聊天背景", f"{a} changed the chat background")
            case "checklist_tasks_done" if msg.checklist_tasks_done is not None:
                done = msg.checklist_tasks_done.marked_as_done_task_ids or []
                undone = msg.checklist_tasks_done.marked_as_not_done_task_ids or []
                parts = []
                if done:
                    ids = ", ".join(f"#{i}" for i in done)
                    parts.append(t(f"将任务 {ids} 标为完成", f"marked tasks {ids} done"))
                if undone:
                    ids = ", ".join(f"#{i}" for i in undone)
                    parts.append(t(f"将任务 {ids} 标为未完成", f"marked tasks {ids} not done"))
                return f"{a} " + t("，", "; ").join(
                    parts or [t("更新了清单", "updated the checklist")]
                )
            case "checklist_tasks_added" if msg.checklist_tasks_added is not None:
                tasks = " / ".join(one_line(task.text) for task in msg.checklist_tasks_added.tasks)
                return t(f"{a} 向清单添加了任务：{tasks}", f"{a} added checklist tasks: {tasks}")
            case "direct_message_price_changed" if msg.direct_message_price_changed is not None:
                d = msg.direct_message_price_changed
                if not d.are_direct_messages_enabled:
                    return t(f"{a} 关闭了频道私信", f"{a} turned off direct messages")
                price = d.direct_message_star_count or 0
                return t(
                    f"{a} 将频道私信价格设为 {price} 星",
                    f"{a} set the direct message price to {price} stars",
                )
            case "paid_message_price_changed" if msg.paid_message_price_changed is not None:
                price = msg.paid_message_price_changed.paid_message_star_count
                return t(
                    f"{a} 将付费消息价格设为 {price} 星",
                    f"{a} set the paid message price to {price} stars",
                )
            case "general_forum_topic_hidden":
                return t(f"{a} 隐藏了“General”话题", f'{a} hid the "General" topic')
            case "general_forum_topic_unhidden":
                return t(f"{a} 取消隐藏“General”话题", f'{a} unhid the "General" topic')
            case "giveaway_created" if msg.giveaway_created is not None:
                cost = self.stars(msg.giveaway_created.prize_star_count)
                return t(f"{a} 创建了抽奖{cost}", f"{a} started a giveaway{cost}")
            case "giveaway_completed" if msg.giveaway_completed is not None:
                ended = msg.giveaway_completed
                unclaimed = ended.unclaimed_prize_count or 0
                left = t(f"，{unclaimed} 份奖品未领取", f", {unclaimed} prizes unclaimed")
                return t(
                    f"抽奖已结束：{ended.winner_count} 人中奖{left if unclaimed else ''}",
                    f"the giveaway ended: {ended.winner_count} winners{left if unclaimed else ''}",
                )
            case "managed_bot_created":
                return t(f"{a} 创建了一个托管机器人", f"{a} created a managed bot")
            case "poll_option_added" if msg.poll_option_added is not None:
                option = one_line(msg.poll_option_added.option_text)
                return t(f"{a} 添加了投票选项「{option}」", f'{a} added the poll option "{option}"')
            case "poll_option_deleted" if msg.poll_option_deleted is not None:
                option = one_line(msg.poll_option_deleted.option_text)
                return t(
                    f"{a} 删除了投票选项「{option}」", f'{a} removed the poll option "{option}"'
                )
            case "suggested_post_approved":
                return t(f"{a} 批准了投稿", f"{a} approved a suggested post")
            case "suggested_post_approval_failed":
                return t("投稿批准失败（付款未完成）", "a suggested post could not be approved")
            case "suggested_post_declined" if msg.suggested_post_declined is not None:
                why = one_line(msg.suggested_post_declined.comment or "")
                said = t(f"：{why}", f": {why}") if why else ""
                return t(f"{a} 拒绝了投稿{said}", f"{a} declined a suggested post{said}")
            case "suggested_post_paid":
                return t("投稿费用已支付", "a suggested post was paid for")
            case "suggested_post_refunded":
                return t("投稿费用已退还", "a suggested post was refunded")
            case "video_chat_scheduled":
                return t(f"{a} 预约了视频聊天", f"{a} scheduled a video chat")
            case "video_chat_started":
                return t(f"{a} 开始了视频聊天", f"{a} started a video chat")
            case "video_chat_ended" if msg.video_chat_ended is not None:
                seconds = msg.video_chat_ended.duration
                return t(
                    f"{a} 结束了视频聊天（{seconds} 秒）", f"{a} ended the video chat ({seconds} s)"
                )
            case "video_chat_participants_invited" if msg.video_chat_participants_invited:
                users = msg.video_chat_participants_invited.users or []
                names = ", ".join(user_name(u) for u in users)
                return t(f"{a} 邀请 {names} 加入视频聊天", f"{a} invited {names} to the video chat")
            case "web_app_data" if msg.web_app_data is not None:
                button = one_line(msg.web_app_data.button_text)
                data, _ = summarize(msg.web_app_data.data, (), self.locale)
                return t(
                    f"{a} 通过按钮「{button}」发送了数据：{data}",
                    f'{a} sent data with the button "{button}": {data}',
                )
            case "community_chat_added" | "community_chat_joined":
                return t("群组加入了一个社群", "the group joined a community")
            case "community_chat_removed":
                return t("群组离开了社群", "the group left its community")
        simple = _SIMPLE_EVENTS.get(kind)
        if simple is not None:
            zh, en = simple
            return t(f"{a} {zh}", f"{a} {en}")
        return None


_SIMPLE_EVENTS: dict[str, tuple[str, str]] = {
    "new_chat_photo": ("更换了群头像", "changed the group photo"),
    "delete_chat_photo": ("删除了群头像", "deleted the group photo"),
    "group_chat_created": ("创建了群组", "created the group"),
    "supergroup_chat_created": ("创建了超级群组", "created the supergroup"),
    "channel_chat_created": ("创建了频道", "created the channel"),
    "forum_topic_closed": ("关闭了话题", "closed the topic"),
    "forum_topic_reopened": ("重新开启了话题", "reopened the topic"),
    "user_shared": ("分享了一位用户", "shared a user"),
}


def _shared_user(user: Any) -> str:
    name = one_line(" ".join(p for p in (user.first_name, user.last_name) if p))
    return name or (f"@{user.username}" if user.username else str(user.user_id))


def _actor_name(actor: User | Chat) -> str:
    return user_name(actor) if isinstance(actor, User) else chat_name_of(actor)


def _describe_pin(pinned: Message | InaccessibleMessage, actor: str, locale: Locale) -> str:
    if isinstance(pinned, Message):
        summary, _ = summarize(pinned.text or pinned.caption or "", media_of(pinned), locale)
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
