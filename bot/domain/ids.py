"""Identifiers of conversations (the session key, the scene a chat belongs to) and the
bot's locale."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Locale = Literal["zh", "en"]
"""The language the bot speaks to people and writes placeholders in (`BOT_LOCALE`)."""

Scene = Literal["group", "private", "owner"]
"""`group` covers groups, supergroups and forum topics; `owner` is the owner's private chat."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionKey:
    """One conversation: a chat on a platform, and a forum thread inside it (0 when none)."""

    platform: str = "telegram"
    chat_id: int
    thread_id: int = 0
