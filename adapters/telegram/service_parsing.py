"""Service messages (joins, pins, topics, payments…) as one readable line in either locale."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiogram.types import (
    Chat,
    Checklist,
    InaccessibleMessage,
    Message,
    SuggestedPostPrice,
    User,
)

from adapters.telegram.message_parts import chat_name_of, media_of, money, user_name
from adapters.telegram.suggested_posts import suggested_price
from adapters.telegram.text_units import Locale, one_line, summarize
from bot.texts import in_locale

# Content types that are conversation content; any other content type is a service message.
_CONTENT_TYPES: frozenset[str] = frozenset(
    {
        "text", "audio", "animation", "document", "game", "photo", "sticker", "story", "video",
        "video_note", "voice", "contact", "dice", "poll", "venue", "location", "invoice",
        "giveaway", "giveaway_winners", "paid_media", "checklist", "live_photo", "unknown",
        "rich_message",
    }
)  # fmt: skip


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
    if actor:
        return in_locale(
            locale,
            zh=f"{actor} 发出了服务消息（{readable}）",
            en=f"{actor}: service message ({readable})",
        )
    return in_locale(locale, zh=f"服务消息（{readable}）", en=f"service message ({readable})")


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
        """`in_locale`, short: this class writes dozens of pairs."""
        return in_locale(self.locale, zh=zh, en=en)

    def stars(self, count: int | None) -> str:
        if count is None:
            return ""
        return self.t(f"（{count} 星）", f" ({count} stars)")

    def price(self, price: SuggestedPostPrice | None) -> str:
        """` (100 stars)` / ` (1.5 TON)`: what a suggested post costs; `""` when unknown."""
        if price is None:
            return ""
        shown = suggested_price(price, self.locale)
        return self.t(f"（{shown}）", f" ({shown})")

    def post(self, post: Message | None) -> str:
        """` "the post's first words"`: which suggested post a line is about."""
        if post is None:
            return ""
        summary, _ = summarize(post.text or post.caption or "", media_of(post), self.locale)
        return self.t(f"「{summary}」", f' "{summary}"') if summary else ""

    def in_checklist(self, checklist: Checklist | None) -> str:
        title = _checklist_title(checklist)
        return self.t(f"（清单「{title}」）", f' in the checklist "{title}"') if title else ""

    def describe(self, kind: str) -> str | None:
        words = _WORDS.get(kind)
        described = words(self) if words is not None else None
        if described is not None:
            return described
        simple = _SIMPLE_EVENTS.get(kind)
        if simple is not None:
            zh, en = simple
            return self.t(f"{self.actor} {zh}", f"{self.actor} {en}")
        return None

    # one method per service kind (`_WORDS`); None when the message lacks the kind's field

    def _new_chat_members(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if not msg.new_chat_members:
            return None
        names = ", ".join(user_name(u) for u in msg.new_chat_members)
        joined_alone = len(msg.new_chat_members) == 1 and (
            msg.from_user is None or msg.from_user.id == msg.new_chat_members[0].id
        )
        if joined_alone:
            return t(f"{names} 加入了群组", f"{names} joined the group")
        return t(f"{a} 邀请 {names} 加入了群组", f"{a} added {names} to the group")

    def _left_chat_member(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.left_chat_member is None:
            return None
        gone = user_name(msg.left_chat_member)
        if msg.from_user is None or msg.from_user.id == msg.left_chat_member.id:
            return t(f"{gone} 离开了群组", f"{gone} left the group")
        return t(f"{a} 将 {gone} 移出了群组", f"{a} removed {gone} from the group")

    def _new_chat_title(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.new_chat_title is None:
            return None
        title = one_line(msg.new_chat_title)
        return t(f"{a} 将群名改为「{title}」", f'{a} changed the group title to "{title}"')

    def _pinned_message(self) -> str | None:
        msg, a = self.msg, self.actor
        if msg.pinned_message is None:
            return None
        return _describe_pin(msg.pinned_message, a, self.locale)

    def _forum_topic_created(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.forum_topic_created is None:
            return None
        name = one_line(msg.forum_topic_created.name)
        return t(f"{a} 创建了话题「{name}」", f'{a} created the topic "{name}"')

    def _forum_topic_edited(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.forum_topic_edited is None:
            return None
        if new_name := one_line(msg.forum_topic_edited.name or ""):
            return t(f"{a} 将话题改名为「{new_name}」", f'{a} renamed the topic to "{new_name}"')
        return t(f"{a} 编辑了话题", f"{a} edited the topic")

    def _chat_owner_left(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.chat_owner_left is None:
            return None
        new = msg.chat_owner_left.new_owner
        if new is None:
            return t(f"群主 {a} 离开了群组", f"the owner {a} left the group")
        owner = user_name(new)
        return t(
            f"群主 {a} 离开了群组，新群主是 {owner}",
            f"the owner {a} left the group; {owner} is the new owner",
        )

    def _chat_owner_changed(self) -> str | None:
        msg, t = self.msg, self.t
        if msg.chat_owner_changed is None:
            return None
        owner = user_name(msg.chat_owner_changed.new_owner)
        return t(f"群主变更为 {owner}", f"{owner} is now the owner of the group")

    def _message_auto_delete_timer_changed(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if not msg.message_auto_delete_timer_changed:
            return None
        seconds = msg.message_auto_delete_timer_changed.message_auto_delete_time
        if seconds == 0:
            return t(f"{a} 关闭了消息自动删除", f"{a} turned off auto-delete")
        return t(
            f"{a} 将消息设为 {seconds} 秒后自动删除",
            f"{a} set messages to auto-delete after {seconds} s",
        )

    def _migrate_to_chat_id(self) -> str:
        t = self.t
        return t("群组升级为超级群组", "the group was upgraded to a supergroup")

    def _successful_payment(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.successful_payment is None:
            return None
        paid = msg.successful_payment
        amount = money(paid.total_amount, paid.currency)
        return t(f"{a} 完成了一笔付款（{amount}）", f"{a} completed a payment ({amount})")

    def _refunded_payment(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.refunded_payment is None:
            return None
        back = msg.refunded_payment
        amount = money(back.total_amount, back.currency)
        return t(f"{a} 的付款已退款（{amount}）", f"{a}'s payment was refunded ({amount})")

    def _users_shared(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.users_shared is None:
            return None
        shared = msg.users_shared.users or []
        names = ", ".join(_shared_user(u) for u in shared)
        return t(f"{a} 分享了用户 {names}".rstrip(), f"{a} shared users: {names}".rstrip(": "))

    def _chat_shared(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.chat_shared is None:
            return None
        c = msg.chat_shared
        name = one_line(c.title or "") or (f"@{c.username}" if c.username else str(c.chat_id))
        return t(f"{a} 分享了聊天「{name}」", f'{a} shared the chat "{name}"')

    def _gift(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.gift is None:
            return None
        note = one_line(msg.gift.text or "")
        said = t(f"：{note}", f": {note}") if note else ""
        cost = self.stars(msg.gift.gift.star_count)
        return t(f"{a} 送出了一份礼物{cost}{said}", f"{a} sent a gift{cost}{said}")

    def _unique_gift(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.unique_gift is None:
            return None
        g = msg.unique_gift.gift
        name = one_line(f"{g.base_name} #{g.number}")
        return t(f"{a} 送出了收藏礼物 {name}", f"{a} sent the collectible gift {name}")

    def _gift_upgrade_sent(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 升级了一份礼物", f"{a} upgraded a gift")

    def _connected_website(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if not msg.connected_website:
            return None
        site = one_line(msg.connected_website)
        return t(f"{a} 通过机器人登录了 {site}", f"{a} logged in on {site} with the bot")

    def _write_access_allowed(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 允许机器人给自己发消息", f"{a} allowed the bot to message them")

    def _passport_data(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 分享了 Telegram Passport 资料", f"{a} shared Telegram Passport data")

    def _proximity_alert_triggered(self) -> str | None:
        msg, t = self.msg, self.t
        if msg.proximity_alert_triggered is None:
            return None
        p = msg.proximity_alert_triggered
        near, watcher = _actor_name(p.traveler), _actor_name(p.watcher)
        return t(
            f"{near} 距离 {watcher} 不到 {p.distance} 米",
            f"{near} is within {p.distance} m of {watcher}",
        )

    def _boost_added(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.boost_added is None:
            return None
        n = msg.boost_added.boost_count
        return t(f"{a} 为群组助力了 {n} 次", f"{a} boosted the group {n} times")

    def _chat_background_set(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 更换了聊天背景", f"{a} changed the chat background")

    def _checklist_tasks_done(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.checklist_tasks_done is None:
            return None
        ticked = msg.checklist_tasks_done
        listed = _checklist_of(ticked.checklist_message)
        done = _tasks(listed, ticked.marked_as_done_task_ids or [])
        undone = _tasks(listed, ticked.marked_as_not_done_task_ids or [])
        parts = []
        if done:
            parts.append(t(f"将任务 {done} 标为完成", f"marked tasks {done} done"))
        if undone:
            parts.append(t(f"将任务 {undone} 标为未完成", f"marked tasks {undone} not done"))
        where = self.in_checklist(listed)
        return (
            f"{a} "
            + t("，", "; ").join(parts or [t("更新了清单", "updated the checklist")])
            + where
        )

    def _checklist_tasks_added(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.checklist_tasks_added is None:
            return None
        added = msg.checklist_tasks_added
        tasks = " / ".join(one_line(task.text) for task in added.tasks)
        title = _checklist_title(_checklist_of(added.checklist_message))
        if title:
            return t(
                f"{a} 向清单「{title}」添加了任务：{tasks}",
                f'{a} added tasks to the checklist "{title}": {tasks}',
            )
        return t(f"{a} 向清单添加了任务：{tasks}", f"{a} added checklist tasks: {tasks}")

    def _direct_message_price_changed(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.direct_message_price_changed is None:
            return None
        d = msg.direct_message_price_changed
        if not d.are_direct_messages_enabled:
            return t(f"{a} 关闭了频道私信", f"{a} turned off direct messages")
        price = d.direct_message_star_count or 0
        return t(
            f"{a} 将频道私信价格设为 {price} 星",
            f"{a} set the direct message price to {price} stars",
        )

    def _paid_message_price_changed(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.paid_message_price_changed is None:
            return None
        price = msg.paid_message_price_changed.paid_message_star_count
        return t(
            f"{a} 将付费消息价格设为 {price} 星",
            f"{a} set the paid message price to {price} stars",
        )

    def _general_forum_topic_hidden(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 隐藏了“General”话题", f'{a} hid the "General" topic')

    def _general_forum_topic_unhidden(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 取消隐藏“General”话题", f'{a} unhid the "General" topic')

    def _giveaway_created(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.giveaway_created is None:
            return None
        cost = self.stars(msg.giveaway_created.prize_star_count)
        return t(f"{a} 创建了抽奖{cost}", f"{a} started a giveaway{cost}")

    def _giveaway_completed(self) -> str | None:
        msg, t = self.msg, self.t
        if msg.giveaway_completed is None:
            return None
        ended = msg.giveaway_completed
        unclaimed = ended.unclaimed_prize_count or 0
        left = t(f"，{unclaimed} 份奖品未领取", f", {unclaimed} prizes unclaimed")
        return t(
            f"抽奖已结束：{ended.winner_count} 人中奖{left if unclaimed else ''}",
            f"the giveaway ended: {ended.winner_count} winners{left if unclaimed else ''}",
        )

    def _managed_bot_created(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 创建了一个托管机器人", f"{a} created a managed bot")

    def _poll_option_added(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.poll_option_added is None:
            return None
        option = one_line(msg.poll_option_added.option_text)
        return t(f"{a} 添加了投票选项「{option}」", f'{a} added the poll option "{option}"')

    def _poll_option_deleted(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.poll_option_deleted is None:
            return None
        option = one_line(msg.poll_option_deleted.option_text)
        return t(f"{a} 删除了投票选项「{option}」", f'{a} removed the poll option "{option}"')

    def _suggested_post_approved(self) -> str:
        msg, a, t = self.msg, self.actor, self.t
        approved = msg.suggested_post_approved
        post = self.post(approved.suggested_post_message if approved else None)
        cost = self.price(approved.price if approved else None)
        return t(f"{a} 批准了投稿{post}{cost}", f"{a} approved a suggested post{post}{cost}")

    def _suggested_post_approval_failed(self) -> str:
        msg, t = self.msg, self.t
        failed = msg.suggested_post_approval_failed
        post = self.post(failed.suggested_post_message if failed else None)
        cost = self.price(failed.price if failed else None)
        return t(
            f"投稿{post}批准失败{cost}：付款未完成",
            f"a suggested post{post} could not be approved{cost}: the payment failed",
        )

    def _suggested_post_declined(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.suggested_post_declined is None:
            return None
        declined = msg.suggested_post_declined
        post = self.post(declined.suggested_post_message)
        why = one_line(declined.comment or "")
        said = t(f"，理由：{why}", f"; the reason: {why}") if why else ""
        return t(f"{a} 拒绝了投稿{post}{said}", f"{a} declined a suggested post{post}{said}")

    def _suggested_post_paid(self) -> str:
        msg, t = self.msg, self.t
        post_paid = msg.suggested_post_paid
        post = self.post(post_paid.suggested_post_message if post_paid else None)
        amount = ""
        if post_paid is not None:
            if post_paid.star_amount is not None:
                amount = self.stars(post_paid.star_amount.amount)
            elif post_paid.amount is not None:
                amount = self.price(
                    SuggestedPostPrice(currency=post_paid.currency, amount=post_paid.amount)
                )
        return t(f"投稿{post}费用已支付{amount}", f"a suggested post{post} was paid for{amount}")

    def _suggested_post_refunded(self) -> str:
        msg, t = self.msg, self.t
        refunded = msg.suggested_post_refunded
        post = self.post(refunded.suggested_post_message if refunded else None)
        why = _refund_reason(refunded.reason if refunded else "", self.locale)
        return t(f"投稿{post}费用已退还{why}", f"a suggested post{post} was refunded{why}")

    def _video_chat_scheduled(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 预约了视频聊天", f"{a} scheduled a video chat")

    def _video_chat_started(self) -> str:
        a, t = self.actor, self.t
        return t(f"{a} 开始了视频聊天", f"{a} started a video chat")

    def _video_chat_ended(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.video_chat_ended is None:
            return None
        seconds = msg.video_chat_ended.duration
        return t(f"{a} 结束了视频聊天（{seconds} 秒）", f"{a} ended the video chat ({seconds} s)")

    def _video_chat_participants_invited(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if not msg.video_chat_participants_invited:
            return None
        users = msg.video_chat_participants_invited.users or []
        names = ", ".join(user_name(u) for u in users)
        return t(f"{a} 邀请 {names} 加入视频聊天", f"{a} invited {names} to the video chat")

    def _web_app_data(self) -> str | None:
        msg, a, t = self.msg, self.actor, self.t
        if msg.web_app_data is None:
            return None
        button = one_line(msg.web_app_data.button_text)
        data, _ = summarize(msg.web_app_data.data, (), self.locale)
        return t(
            f"{a} 通过按钮「{button}」发送了数据：{data}",
            f'{a} sent data with the button "{button}": {data}',
        )

    def _community_chat_added(self) -> str:
        t = self.t
        return t("群组加入了一个社群", "the group joined a community")

    def _community_chat_removed(self) -> str:
        t = self.t
        return t("群组离开了社群", "the group left its community")


_WORDS: dict[str, Callable[[_ServiceWords], str | None]] = {
    "new_chat_members": _ServiceWords._new_chat_members,
    "left_chat_member": _ServiceWords._left_chat_member,
    "new_chat_title": _ServiceWords._new_chat_title,
    "pinned_message": _ServiceWords._pinned_message,
    "forum_topic_created": _ServiceWords._forum_topic_created,
    "forum_topic_edited": _ServiceWords._forum_topic_edited,
    "chat_owner_left": _ServiceWords._chat_owner_left,
    "chat_owner_changed": _ServiceWords._chat_owner_changed,
    "message_auto_delete_timer_changed": _ServiceWords._message_auto_delete_timer_changed,
    "migrate_to_chat_id": _ServiceWords._migrate_to_chat_id,
    "migrate_from_chat_id": _ServiceWords._migrate_to_chat_id,
    "successful_payment": _ServiceWords._successful_payment,
    "refunded_payment": _ServiceWords._refunded_payment,
    "users_shared": _ServiceWords._users_shared,
    "chat_shared": _ServiceWords._chat_shared,
    "gift": _ServiceWords._gift,
    "unique_gift": _ServiceWords._unique_gift,
    "gift_upgrade_sent": _ServiceWords._gift_upgrade_sent,
    "connected_website": _ServiceWords._connected_website,
    "write_access_allowed": _ServiceWords._write_access_allowed,
    "passport_data": _ServiceWords._passport_data,
    "proximity_alert_triggered": _ServiceWords._proximity_alert_triggered,
    "boost_added": _ServiceWords._boost_added,
    "chat_background_set": _ServiceWords._chat_background_set,
    "checklist_tasks_done": _ServiceWords._checklist_tasks_done,
    "checklist_tasks_added": _ServiceWords._checklist_tasks_added,
    "direct_message_price_changed": _ServiceWords._direct_message_price_changed,
    "paid_message_price_changed": _ServiceWords._paid_message_price_changed,
    "general_forum_topic_hidden": _ServiceWords._general_forum_topic_hidden,
    "general_forum_topic_unhidden": _ServiceWords._general_forum_topic_unhidden,
    "giveaway_created": _ServiceWords._giveaway_created,
    "giveaway_completed": _ServiceWords._giveaway_completed,
    "managed_bot_created": _ServiceWords._managed_bot_created,
    "poll_option_added": _ServiceWords._poll_option_added,
    "poll_option_deleted": _ServiceWords._poll_option_deleted,
    "suggested_post_approved": _ServiceWords._suggested_post_approved,
    "suggested_post_approval_failed": _ServiceWords._suggested_post_approval_failed,
    "suggested_post_declined": _ServiceWords._suggested_post_declined,
    "suggested_post_paid": _ServiceWords._suggested_post_paid,
    "suggested_post_refunded": _ServiceWords._suggested_post_refunded,
    "video_chat_scheduled": _ServiceWords._video_chat_scheduled,
    "video_chat_started": _ServiceWords._video_chat_started,
    "video_chat_ended": _ServiceWords._video_chat_ended,
    "video_chat_participants_invited": _ServiceWords._video_chat_participants_invited,
    "web_app_data": _ServiceWords._web_app_data,
    "community_chat_added": _ServiceWords._community_chat_added,
    "community_chat_joined": _ServiceWords._community_chat_added,
    "community_chat_removed": _ServiceWords._community_chat_removed,
}
"""The words of each service kind that needs more than `_SIMPLE_EVENTS` gives."""

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


def _refund_reason(reason: str, locale: Locale) -> str:
    match reason:
        case "post_deleted":
            return in_locale(locale, zh="：帖子已被删除", en=": the post was deleted")
        case "payment_refunded":
            return in_locale(locale, zh="：付款已退回", en=": the payment was refunded")
        case "":
            return ""
        case _:
            words = one_line(reason.replace("_", " "))
            return in_locale(locale, zh=f"：{words}", en=f": {words}")


def _checklist_of(message: Message | None) -> Checklist | None:
    return message.checklist if message is not None else None


def _checklist_title(checklist: Checklist | None) -> str:
    return one_line(checklist.title) if checklist is not None and checklist.title else ""


def _tasks(checklist: Checklist | None, ids: list[int]) -> str:
    """`#2 publish, #3` : each task by its number, and its words when the checklist names it."""
    texts = {task.id: one_line(task.text) for task in checklist.tasks} if checklist else {}
    return ", ".join(f"#{i} {texts[i]}" if texts.get(i) else f"#{i}" for i in ids)


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
    return in_locale(
        locale,
        zh=f"{actor} 置顶了消息 #{mid}" + (f"：{summary}" if summary else ""),
        en=f"{actor} pinned message #{mid}" + (f": {summary}" if summary else ""),
    )
