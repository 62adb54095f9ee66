"""Service messages (joins, pins, topics, payments…) as one readable line in either locale."""

from __future__ import annotations

from typing import Any

from aiogram.types import (
    Chat,
    Checklist,
    InaccessibleMessage,
    Message,
    SuggestedPostPrice,
    User,
)

from adapters.telegram.media_parsing import media_of, money
from adapters.telegram.senders import chat_name_of, user_name
from adapters.telegram.text_units import Locale, one_line, summarize
from bot.domain.facts import Media
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
                paid = msg.successful_payment
                amount = money(paid.total_amount, paid.currency)
                return t(f"{a} 完成了一笔付款（{amount}）", f"{a} completed a payment ({amount})")
            case "refunded_payment" if msg.refunded_payment is not None:
                back = msg.refunded_payment
                amount = money(back.total_amount, back.currency)
                return t(f"{a} 的付款已退款（{amount}）", f"{a}'s payment was refunded ({amount})")
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
                ticked = msg.checklist_tasks_done
                listed = _checklist_of(ticked.checklist_message)
                done = _tasks(listed, ticked.marked_as_done_task_ids or [])
                undone = _tasks(listed, ticked.marked_as_not_done_task_ids or [])
                parts = []
                if done:
                    parts.append(t(f"将任务 {done} 标为完成", f"marked tasks {done} done"))
                if undone:
                    parts.append(
                        t(f"将任务 {undone} 标为未完成", f"marked tasks {undone} not done")
                    )
                where = self.in_checklist(listed)
                return (
                    f"{a} "
                    + t("，", "; ").join(parts or [t("更新了清单", "updated the checklist")])
                    + where
                )
            case "checklist_tasks_added" if msg.checklist_tasks_added is not None:
                added = msg.checklist_tasks_added
                tasks = " / ".join(one_line(task.text) for task in added.tasks)
                title = _checklist_title(_checklist_of(added.checklist_message))
                if title:
                    return t(
                        f"{a} 向清单「{title}」添加了任务：{tasks}",
                        f'{a} added tasks to the checklist "{title}": {tasks}',
                    )
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
                approved = msg.suggested_post_approved
                post = self.post(approved.suggested_post_message if approved else None)
                cost = self.price(approved.price if approved else None)
                return t(
                    f"{a} 批准了投稿{post}{cost}", f"{a} approved a suggested post{post}{cost}"
                )
            case "suggested_post_approval_failed":
                failed = msg.suggested_post_approval_failed
                post = self.post(failed.suggested_post_message if failed else None)
                cost = self.price(failed.price if failed else None)
                return t(
                    f"投稿{post}批准失败{cost}：付款未完成",
                    f"a suggested post{post} could not be approved{cost}: the payment failed",
                )
            case "suggested_post_declined" if msg.suggested_post_declined is not None:
                declined = msg.suggested_post_declined
                post = self.post(declined.suggested_post_message)
                why = one_line(declined.comment or "")
                said = t(f"，理由：{why}", f"; the reason: {why}") if why else ""
                return t(
                    f"{a} 拒绝了投稿{post}{said}", f"{a} declined a suggested post{post}{said}"
                )
            case "suggested_post_paid":
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
                return t(
                    f"投稿{post}费用已支付{amount}", f"a suggested post{post} was paid for{amount}"
                )
            case "suggested_post_refunded":
                refunded = msg.suggested_post_refunded
                post = self.post(refunded.suggested_post_message if refunded else None)
                why = _refund_reason(refunded.reason if refunded else "", self.locale)
                return t(f"投稿{post}费用已退还{why}", f"a suggested post{post} was refunded{why}")
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


def suggested_price(price: SuggestedPostPrice, locale: Locale) -> str:
    """`100 stars` (XTR) or `1.5 TON` (nanotoncoins): a suggested post's price."""
    if price.currency.upper() == "XTR":
        return in_locale(locale, zh=f"{price.amount} 星", en=f"{price.amount} stars")
    if price.currency.upper() == "TON":
        whole, nano = divmod(price.amount, 10**9)
        fraction = f".{nano:09d}".rstrip("0").rstrip(".")
        return f"{whole}{fraction} TON"
    return money(price.amount, price.currency)


_POST_STATES = {
    "pending": ("待审核", "pending"),
    "approved": ("已批准", "approved"),
    "declined": ("已拒绝", "declined"),
}


def suggested_post_fact(msg: Message, locale: Locale) -> tuple[Media, ...]:
    """A suggested post's state and price (`suggested_post_info`) as a placeholder:
    `[suggested post pending, 100 stars]`; () for any other message."""
    info = msg.suggested_post_info
    if info is None:
        return ()
    zh, en = _POST_STATES.get(info.state, (info.state, info.state))
    state = in_locale(locale, zh=zh, en=en)
    cost = suggested_price(info.price, locale) if info.price is not None else ""
    return (Media(kind="suggested_post", detail=", ".join(p for p in (state, cost) if p)),)


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
