"""The header line before each message, byte-stable so provider caches hold.

    [id:m12;user:Alice;user_id:1001;time:14:03;reply_to:m9;]

Fields, in this order, each closed by `;`, only when they apply:
- `id:<alias>`, or `parts:m7,unknown,m7.3` for a record of several platform messages
  (`unknown` for an unconfirmed slot); left out for a record without a confirmed id.
- `user:<name>;user_id:<id>` on a sender's first message in the window and when their name
  changed since their previous one; `user_id:<id>` alone after that, and always for a
  sender whose name is only their id (a name of invisible characters). Left out for our own
  replies, and for the human in private and owner chats (there is only one).
- `owner:true` after the sender fields when the sender is the bot's owner (checked by user
  id, never by name): in a group the model can tell the owner from a member named "Owner".
- `origin:peer_bot` when the sender is a bot that is not us; `origin:linked_channel` for
  Telegram's automatic forward of the linked channel's post (members comment under it).
- `via:@<username>` when the message was sent through an inline bot (the words are the
  bot's, picked by the sender); shown in every scene, also where sender fields are not.
- `paid_stars:<n>` when the sender paid Telegram Stars to send the message
  (`paid_star_count`), in every scene.
- `date:YYYY-MM-DD` on the first header of the window and the first of a new day in the
  bot's time zone; `time:HH:mm` with every date and whenever at least 60 s passed since the
  last header that *showed* a time.
- `reply_to:<alias>` when the quoted message is inside the window.
- `album:<alias>` on every part of a media group: the alias of its first part in the window.
A record with no field at all gets no header line.

`HeaderWalker` is the only state: it walks the window oldest first, so the header of a
message depends only on the messages before it in the same window. Naive datetimes are
taken as UTC.

See docs/architecture.md, Rendering a message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from bot.context.escaping import header_value
from bot.domain.facts import Sender
from bot.domain.ids import Scene

TIME_GAP = timedelta(seconds=60)
UNKNOWN_SLOT = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """The fields of one header; `ids` holds one alias a platform slot (`None` unconfirmed)."""

    ids: tuple[str | None, ...] = ()
    user_name: str | None = None
    user_id: int | None = None
    owner: bool = False
    peer_bot: bool = False
    via: str | None = None
    date: str | None = None
    time: str | None = None
    reply_to: str | None = None
    album: str | None = None
    linked_channel: bool = False
    paid_stars: int | None = None


def render_header(header: Header) -> str:
    """The header line without a line break; `""` when no field applies."""
    fields: list[str] = []
    if len(header.ids) == 1 and header.ids[0] is not None:
        fields.append(f"id:{header_value(header.ids[0])};")
    elif len(header.ids) > 1 and any(alias is not None for alias in header.ids):
        parts = ",".join(header_value(a) if a is not None else UNKNOWN_SLOT for a in header.ids)
        fields.append(f"parts:{parts};")
    if header.user_name is not None:
        fields.append(f"user:{header_value(header.user_name)};")
    if header.user_id is not None:
        fields.append(f"user_id:{header.user_id};")
    fields.extend(_origin_fields(header))
    if header.date is not None:
        fields.append(f"date:{header.date};")
    if header.time is not None:
        fields.append(f"time:{header.time};")
    if header.reply_to is not None:
        fields.append(f"reply_to:{header_value(header.reply_to)};")
    if header.album is not None:
        fields.append(f"album:{header_value(header.album)};")
    return "[" + "".join(fields) + "]" if fields else ""


def _origin_fields(header: Header) -> list[str]:
    """What the header says of where the message comes from: the owner, another bot, the
    linked channel, an inline bot, Stars paid to send it."""
    fields = []
    if header.owner:
        fields.append("owner:true;")
    if header.peer_bot:
        fields.append("origin:peer_bot;")
    elif header.linked_channel:
        fields.append("origin:linked_channel;")
    if header.via is not None:
        fields.append(f"via:{header_value(header.via)};")
    if header.paid_stars:
        fields.append(f"paid_stars:{header.paid_stars};")
    return fields


def as_utc(moment: datetime) -> datetime:
    """Aware datetimes as they are; naive ones are taken as UTC (never the host's zone)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def local_hhmm(moment: datetime, zone: tzinfo) -> str:
    return as_utc(moment).astimezone(zone).strftime("%H:%M")


def local_day(moment: datetime, zone: tzinfo) -> date:
    return as_utc(moment).astimezone(zone).date()


@dataclass(frozen=True, slots=True)
class WalkState:
    """A `HeaderWalker`'s state between two messages: the last time shown, its day, and the
    name last shown per sender."""

    last_shown: datetime | None
    last_day: date | None
    names: Mapping[int, str]


class HeaderWalker:
    """Builds the headers of one window, oldest message first (used inside projection only)."""

    __slots__ = (
        "_bot_user_id",
        "_last_day",
        "_last_shown",
        "_names",
        "_owner_id",
        "_scene",
        "_zone",
    )

    def __init__(
        self,
        *,
        zone: tzinfo,
        scene: Scene,
        bot_user_id: int | None,
        owner_id: int | None = None,
    ) -> None:
        self._owner_id = owner_id
        self._zone = zone
        self._scene = scene
        self._bot_user_id = bot_user_id
        self._last_shown: datetime | None = None
        self._last_day: date | None = None
        self._names: dict[int, str] = {}

    def header(
        self,
        *,
        ids: Sequence[str | None],
        at: datetime,
        sender: Sender | None = None,
        reply_to: str | None = None,
        album: str | None = None,
        linked_channel: bool = False,
        paid_stars: int | None = None,
    ) -> str:
        """The next message's header line (`""` when it has no field); advances the walk.

        `sender` is `None` for our own replies and for records without an actor.
        """
        user_name, user_id, peer_bot = self._sender_fields(sender)
        day_text, time_text = self._stamp(as_utc(at))
        return render_header(
            Header(
                ids=tuple(ids),
                user_name=user_name,
                user_id=user_id,
                owner=user_id is not None
                and self._owner_id is not None
                and user_id == self._owner_id
                and sender is not None
                and sender.kind == "user",
                peer_bot=peer_bot,
                via=sender.via_bot if sender is not None else None,
                date=day_text,
                time=time_text,
                reply_to=reply_to,
                album=album,
                linked_channel=linked_channel,
                paid_stars=paid_stars,
            )
        )

    def snapshot(self) -> WalkState:
        """Where the walk stands (a copy: the walk goes on)."""
        return WalkState(self._last_shown, self._last_day, dict(self._names))

    def restore(self, state: WalkState) -> None:
        """Go on from `state` (taken from a walker with the same arguments)."""
        self._last_shown, self._last_day = state.last_shown, state.last_day
        self._names = dict(state.names)

    def _sender_fields(self, sender: Sender | None) -> tuple[str | None, int | None, bool]:
        if sender is None:
            return None, None, False
        is_us = self._bot_user_id is not None and sender.id == self._bot_user_id
        peer_bot = sender.is_bot and not is_us
        if self._scene != "group" and not sender.is_bot:
            return None, None, False
        if self._names.get(sender.id) == sender.name or sender.name == str(sender.id):
            # a name that is only the id (nothing visible to show) adds nothing
            return None, sender.id, peer_bot
        self._names[sender.id] = sender.name
        return sender.name, sender.id, peer_bot

    def _stamp(self, at: datetime) -> tuple[str | None, str | None]:
        local = at.astimezone(self._zone)
        day = local.date()
        new_day = day != self._last_day
        self._last_day = day
        if new_day or self._last_shown is None or at - self._last_shown >= TIME_GAP:
            self._last_shown = at
            return (day.isoformat() if new_day else None), local.strftime("%H:%M")
        return None, None
