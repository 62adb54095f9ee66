"""Identifiers of conversations: the session key and the scene a chat belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scene = Literal["group", "private", "owner"]
"""`group` covers groups, supergroups and forum topics; `owner` is the owner's private chat."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionKey:
    """One conversation: a chat on a platform, and a forum thread inside it (0 when none)."""

    platform: str = "telegram"
    chat_id: int
    thread_id: int = 0
