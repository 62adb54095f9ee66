"""Inbound facts captured whole from a platform update, so projection never calls the platform."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

SenderKind = Literal["user", "bot", "anonymous_admin", "channel"]

MediaKind = Literal[
    "photo",
    "voice",
    "audio",
    "video",
    "video_note",
    "animation",
    "document",
    "sticker",
    "location",
    "contact",
    "poll",
    "other",
    "dice",
    "venue",
    "game",
    "story",
    "invoice",
    "paid_media",
    "giveaway",
    "giveaway_winners",
    "checklist",
    "live_photo",
    "unknown",
    "suggested_post",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sender:
    """Who wrote a message. For an anonymous admin or a channel, `id` is the sender chat's id.

    `via_bot` names the inline bot the message was sent through (`@gif`, `@quiz_bot`): the
    words are that bot's, chosen by the sender. `@username` when the bot has one, else its name.
    """

    id: int
    name: str
    username: str | None = None
    is_bot: bool = False
    kind: SenderKind = "user"
    via_bot: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Media:
    """A media attachment or a non-text content, kept as facts for a placeholder (`[语音 3s]`).

    The details people care about, by kind: `title` (venue title, contact name, poll
    question, game / invoice / checklist title, giveaway prize, story's chat), `detail`
    (venue address, rounded coordinates, poll options, checklist tasks, giveaway winners)
    and `value` (dice value, winner count, star count, a poll's voters). A sticker's `title`
    is its set's name. Title and detail are member content.

    Files (photo, document, sticker, voice…) also keep what fetching them needs
    (docs/architecture.md, Images, documents and voice): `file_id` (valid for this bot
    only), `file_unique_id` (the same file everywhere: the media cache's key), `width` /
    `height` (photos, stickers), `mime_type`, `file_size` in bytes as Telegram reported
    it. `transcript` is a voice or video note's text, once transcribed (member content).
    """

    kind: MediaKind
    duration: int | None = None
    file_name: str | None = None
    emoji: str | None = None
    file_id: str | None = None
    title: str | None = None
    detail: str | None = None
    value: int | None = None
    file_unique_id: str | None = None
    width: int | None = None
    height: int | None = None
    mime_type: str | None = None
    file_size: int | None = None
    transcript: str | None = None
    closed: bool | None = None
    """A poll no longer takes votes (`is_closed`); None for every other kind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Quote:
    """A trusted quote relation: the message replied to, summarised to at most 120 characters.

    `id` is the quoted message's platform id. `summary` is already one line with media
    placeholders; `truncated` says whether it was cut. `sender_id` and `timestamp` are
    `None` when the target could not be resolved (only the id is then known).
    `fragment` says `summary` is the part of the message the sender selected (Telegram's
    `quote`), shown even when the target is in the window. `chat_name` names the other
    chat of an external reply (title or `@username`); `forwarded_from` the original author
    when the quoted message was itself a forward (one level). `task` is the checklist task
    a reply names (`reply_to_checklist_task_id`; its text is then the fragment). `story` is
    the id of the story a reply answers (`reply_to_story`): `id` is then 0 (no message),
    `chat_name` the story's chat and `summary` its placeholder.
    """

    id: int
    sender_id: int | None = None
    timestamp: datetime | None = None
    summary: str = ""
    truncated: bool = False
    chat_id: int | None = None
    fragment: bool = False
    chat_name: str | None = None
    forwarded_from: str | None = None
    task: int | None = None
    story: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Forward:
    """Where a forwarded message came from (one level only)."""

    from_name: str
    from_id: int | None = None
    hidden: bool = False
    date: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundMessage:
    """One inbound platform message (or an edit of one), parsed from an update.

    `date` is timezone-aware UTC. `text` is the text or the caption. `event` is set for
    service messages (members joined, title changed, pinned…) and then holds a one-line
    description; such messages become event records instead of user records.
    """

    update_id: int | None = None
    chat_id: int
    chat_type: Literal["private", "group", "supergroup", "channel"]
    chat_title: str | None = None
    thread_id: int = 0
    message_id: int
    date: datetime
    sender: Sender
    text: str = ""
    media: tuple[Media, ...] = ()
    media_group_id: str | None = None
    automatic_forward: bool = False
    direct_messages: bool = False
    """The chat is a channel's direct-messages chat: each topic a one-to-one conversation
    with the member who wrote, governed by `private_chats` like a private chat."""
    topic_name: str | None = None
    """The forum topic's name when the message creates or renames the topic."""
    topic_first_name: str | None = None
    """The name the topic was created with, from the implicit reply every topic message
    carries: a rename does not change it, so it only names a topic not known yet."""
    """Telegram forwarded it from the group's linked channel (the post members comment on)."""
    quote: Quote | None = None
    forward: Forward | None = None
    is_edit: bool = False
    edit_date: datetime | None = None
    mentions_bot: bool = False
    replies_to_bot: bool = False
    command: str | None = None
    event: str | None = None
    language_code: str | None = None
    """The sender's Telegram app language (IETF tag, `zh-hans`, `en`), when Telegram sends
    it: what `BOT_LOCALE=auto` answers in."""
    chat_migration: tuple[int, int] | None = None
    """(old chat id, new chat id) on the service message of a group upgraded to a
    supergroup (`migrate_from_chat_id` in the new chat, `migrate_to_chat_id` in the old)."""
    paid_stars: int | None = None
    """The Telegram Stars the sender paid to send it (`paid_star_count`), when they did."""


MembershipChangeKind = Literal["added", "removed", "updated"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipChange:
    """The bot's own membership in a chat changed (Telegram's `my_chat_member`).

    `change` is "added" when the bot can now read the chat, "removed" when it left or was
    kicked (nothing more may be sent there), "updated" for anything else (promoted,
    restricted but still a member). `status` is the new status as Telegram names it
    ("member", "administrator", "left", "kicked", …); `actor` is who made the change.
    """

    update_id: int | None = None
    chat_id: int
    chat_type: Literal["private", "group", "supergroup", "channel"]
    chat_title: str | None = None
    date: datetime
    actor: Sender
    change: MembershipChangeKind
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReactionChange:
    """Someone changed their reactions to a message (Telegram's `message_reaction`).

    `added`/`removed` are the reactions that appeared or went away: an emoji, or
    `custom_emoji:<id>`, or `paid`. `actor` is the user, or the chat for an anonymous
    admin or a channel. Whether the message is the bot's is for the consumer to decide.
    """

    update_id: int | None = None
    chat_id: int
    message_id: int
    date: datetime
    actor: Sender
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
