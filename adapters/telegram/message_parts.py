"""The parts of a message that ordinary and service parsing both read: who wrote it (and the
names of users and chats as the model reads them) and its media as `Media` facts."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from aiogram.types import Chat, ExternalReplyInfo, GiveawayWinners, Message, User

from adapters.telegram.text_units import one_line
from bot.context.escaping import is_invisible
from bot.domain.facts import Media, Sender


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
    """The user's name; a name that shows nothing (only U+200E, fillers, spaces) falls back
    to `@username`, else to the id (the header then shows `user_id:` alone)."""
    full = one_line(" ".join(part for part in (user.first_name, user.last_name) if part))
    if not is_invisible(full):
        return full
    return f"@{user.username}" if user.username else str(user.id)


def chat_name_of(chat: Chat) -> str:
    """A chat's title, else its person's name, else `@username`, else its id."""
    if chat.title:
        return one_line(chat.title)
    full = one_line(" ".join(part for part in (chat.first_name, chat.last_name) if part))
    if not is_invisible(full):
        return full
    return f"@{chat.username}" if chat.username else str(chat.id)


def _known_chat_name(chat: Chat) -> str | None:
    """`chat_name_of` when the chat has a name at all (not just an id)."""
    name = chat_name_of(chat)
    return None if name == str(chat.id) else name


# Where coordinates are cut: 3 decimals is about 100 m, enough to say where, not a doorstep.
COORDINATE_DECIMALS = 3


def media_of(msg: Message | ExternalReplyInfo) -> tuple[Media, ...]:
    """The media and non-text content of a message (or of an external reply's content)."""
    if msg.live_photo is not None:  # before photo: a live photo carries a still too
        return (Media(kind="live_photo", duration=msg.live_photo.duration),)
    if msg.photo:
        p = msg.photo[-1]  # the largest size Telegram made
        return (
            Media(
                kind="photo",
                file_id=p.file_id,
                file_unique_id=p.file_unique_id or None,
                width=p.width,
                height=p.height,
                mime_type="image/jpeg",
                file_size=p.file_size,
            ),
        )
    if msg.voice is not None:
        v = msg.voice
        return (
            Media(
                kind="voice",
                duration=v.duration,
                file_id=v.file_id,
                file_unique_id=v.file_unique_id or None,
                mime_type=v.mime_type or None,
                file_size=v.file_size,
            ),
        )
    if msg.video_note is not None:
        n = msg.video_note
        return (
            Media(
                kind="video_note",
                duration=n.duration,
                file_id=n.file_id,
                file_unique_id=n.file_unique_id or None,
                mime_type="video/mp4",
                file_size=n.file_size,
            ),
        )
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
        return (
            Media(
                kind="document",
                file_name=d.file_name,
                file_id=d.file_id,
                file_unique_id=d.file_unique_id or None,
                mime_type=d.mime_type or None,
                file_size=d.file_size,
            ),
        )
    if msg.sticker is not None:
        s = msg.sticker
        # an animated (TGS) or video (WEBM) sticker is no still image: no mime type to fetch
        still = not (s.is_animated or s.is_video)
        return (
            Media(
                kind="sticker",
                emoji=s.emoji,
                title=s.set_name or None,
                file_id=s.file_id,
                file_unique_id=s.file_unique_id or None,
                width=s.width,
                height=s.height,
                mime_type="image/webp" if still else None,
                file_size=s.file_size,
            ),
        )
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
        poll = msg.poll
        options = " / ".join(option.text for option in poll.options)
        return (
            Media(
                kind="poll",
                title=poll.question,
                detail=options or None,
                value=poll.total_voter_count or None,
                closed=True if poll.is_closed else None,
            ),
        )
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
        invoice = msg.invoice
        amount = money(invoice.total_amount, invoice.currency)
        return (Media(kind="invoice", title=invoice.title, detail=amount),)
    if msg.story is not None:
        return (Media(kind="story", title=_known_chat_name(msg.story.chat)),)
    if msg.paid_media is not None:
        return (Media(kind="paid_media", value=msg.paid_media.star_count),)
    if isinstance(msg, Message) and msg.rich_message is not None:
        return ()  # its text is the message's text (`rich_text`)
    return ()


def _winners(w: GiveawayWinners) -> Media:
    names = ", ".join(user_name(user) for user in w.winners)
    return Media(kind="giveaway_winners", value=w.winner_count, title=w.prize_description,
                 detail=names or None)  # fmt: skip


# ISO 4217 currencies without minor units, and Telegram Stars: `total_amount` is whole units
_NO_MINOR_UNITS = frozenset(
    {"BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND",
     "VUV", "XAF", "XOF", "XPF", "XTR"}
)  # fmt: skip


def money(total: int, currency: str) -> str:
    """An amount in the smallest units (`total_amount`) as people read it: `12.50 USD`."""
    if currency.upper() in _NO_MINOR_UNITS:
        return f"{total} {currency}"
    sign = "-" if total < 0 else ""
    whole, cents = divmod(abs(total), 100)
    return f"{sign}{whole}.{cents:02d} {currency}"
