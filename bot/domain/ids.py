"""Identifiers of conversations (the session key, the scene a chat belongs to), the bot's
locale, and the fresh ids of turns and model calls."""

from __future__ import annotations

import random
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


def fresh_hex(digits: int = 12) -> str:
    """`digits` random hex digits: a turn id, the tail of a call id. They name things in logs,
    traces and the ledger, never guard anything, so they come from the process's seeded
    generator (`random`, seeded from the system at start-up and again in a forked child)
    rather than a system call per id (`secrets`, `uuid4`), which shows in the CPU of every
    message."""
    return f"{random.getrandbits(digits * 4):0{digits}x}"
