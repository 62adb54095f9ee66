"""A message on the chat platform as the bot keeps it (`PlatformMessage`), and what an outbound
send achieved (`Delivery`): the bot's own platform messages are the bubbles it confirms."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.domain.facts import Media


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformMessage:
    """One real platform message (inbound, or a confirmed outbound bubble)."""

    chat_id: int
    thread_id: int = 0
    message_id: int
    sender_id: int | None
    sender_name: str = ""
    is_bot: bool = False
    date: datetime
    text: str = ""
    media: tuple[Media, ...] = ()
    reply_to_message_id: int | None = None
    record_id: int | None = None
    edited_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """What an outbound send achieved: one slot per planned bubble, `None` where it failed.

    `texts[i]` is what bubble i was made from (the Markdown as the model wrote it, not the
    formatted text Telegram shows); `error` is the failure that stopped the rest.
    """

    message_ids: tuple[int | None, ...]
    texts: tuple[str, ...]
    dates: tuple[datetime | None, ...] = ()
    error: Exception | None = None

    @property
    def delivered(self) -> bool:
        return any(mid is not None for mid in self.message_ids)

    def platform_messages(
        self,
        *,
        chat_id: int,
        thread_id: int,
        sender_id: int | None,
        sender_name: str,
        reply_to: int | None,
        now: datetime,
        record_id: int | None = None,
        slots: range | None = None,
    ) -> list[PlatformMessage]:
        """Platform messages of the confirmed bubbles (only `slots` if given), as the bot's
        messages; a bubble without a confirmed date is dated `now`."""
        dates = self.dates or (None,) * len(self.message_ids)
        wanted = slots if slots is not None else range(len(self.message_ids))
        return [
            PlatformMessage(
                chat_id=chat_id,
                thread_id=thread_id,
                message_id=mid,
                sender_id=sender_id,
                sender_name=sender_name,
                is_bot=True,
                date=date or now,
                text=bubble,
                reply_to_message_id=reply_to,
                record_id=record_id,
            )
            for index, (mid, bubble, date) in enumerate(
                zip(self.message_ids, self.texts, dates, strict=False)
            )
            if mid is not None and index in wanted
        ]
