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
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sender:
    """Who wrote a message. For an anonymous admin or a channel, `id` is the sender chat's id."""

    id: int
    name: str
    username: str | None = None
    is_bot: bool = False
    kind: SenderKind = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class Media:
    """A media attachment, kept as facts for a placeholder such as `[语音 3s]`."""

    kind: MediaKind
    duration: int | None = None
    file_name: str | None = None
    emoji: str | None = None
    file_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Quote:
    """A trusted quote relation: the message replied to, summarised to at most 120 characters.

    `id` is the quoted message's platform id. `summary` is already one line with media
    placeholders; `truncated` says whether it was cut. `sender_id` and `timestamp` are
    `None` when the target could not be resolved (only the id is then known).
    `is_manual` says the sender selected part of the message (Telegram's `quote`).
    """

    id: int
    sender_id: int | None = None
    timestamp: datetime | None = None
    summary: str = ""
    truncated: bool = False
    chat_id: int | None = None
    is_manual: bool = False


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
    quote: Quote | None = None
    forward: Forward | None = None
    is_edit: bool = False
    edit_date: datetime | None = None
    mentions_bot: bool = False
    replies_to_bot: bool = False
    command: str | None = None
    event: str | None = None


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
