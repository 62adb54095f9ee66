"""A chat's settings as changed with `/settings`: the stored changes over the TOML file's,
cached for the per-turn lookup and read by every worker (docs/groups.md, /settings).

`ChatSettingsBook` keeps every chat's stored changes in memory for the synchronous
`ChatScopes.overlay`, and reloads them when they are older than `REFRESH_SECONDS` (each
inbound batch asks), so a change made on one worker holds on the others within seconds. The
command itself (who may change what, the values each setting takes) is
`bot.services.settings_command`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from bot.agent.chat_scope import ChatScope, ChatScopes
from bot.ports import Clock

Overrides = dict[int, dict[str, object]]
"""Each chat's stored changes: setting name → value (JSON-able)."""
REFRESH_SECONDS = 2.0


class ChatSettingsStore(Protocol):
    async def load(self) -> Overrides: ...

    async def change(
        self, chat_id: int, name: str, value: object, *, by: int, at: datetime
    ) -> None: ...


class LocalChatSettings:
    """The in-memory twin of `storage.chat_settings.SqlChatSettings` (one process)."""

    def __init__(self) -> None:
        self._rows: Overrides = {}

    async def load(self) -> Overrides:
        return {chat: dict(values) for chat, values in self._rows.items() if values}

    async def change(
        self, chat_id: int, name: str, value: object, *, by: int, at: datetime
    ) -> None:
        values = self._rows.setdefault(chat_id, {})
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value


_TRIGGER_FIELDS = {
    "keywords": "keywords",
    "patterns": "patterns",
    "ambient": "ambient",
    "ambient_cooldown_seconds": "ambient_cooldown_seconds",
    "ambient_daily_max": "ambient_daily_max",
    "answer_bots": "answer_bots",
    "answer_on_mention": "on_mention",
    "answer_on_reply": "on_reply",
}


def apply_overrides(scope: ChatScope, values: Mapping[str, object]) -> ChatScope:
    """`scope` with a chat's stored changes over it."""
    changed: dict[str, Any] = {}
    triggers: dict[str, Any] = {}
    for name, value in values.items():
        if name in _TRIGGER_FIELDS:
            triggers[_TRIGGER_FIELDS[name]] = tuple(value) if isinstance(value, list) else value
        elif name in ("persona", "locale", "route", "timezone", "enabled"):
            changed[name] = value
    if triggers:
        changed["triggers"] = replace(scope.triggers, **triggers)
    return replace(scope, **changed) if changed else scope


# ------------------------------------------------------------------ the book


class ChatSettingsBook:
    """Every chat's stored changes, cached for `ChatScopes.overlay` (see the module)."""

    def __init__(self, store: ChatSettingsStore, *, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._values: Overrides = {}
        self._loaded_at: datetime | None = None
        """When the changes were last read (the book's clock: tests step it)."""

    def attach(self, scopes: ChatScopes) -> ChatSettingsBook:
        scopes.overlay = self.overlay
        return self

    def overlay(self, chat_id: int, scope: ChatScope) -> ChatScope:
        values = self._values.get(chat_id)
        return apply_overrides(scope, values) if values else scope

    async def refresh(self, *, force: bool = False) -> None:
        now = self.clock.now()
        loaded = self._loaded_at
        # stale after REFRESH_SECONDS, or when the clock went back (never stuck on a copy)
        if force or loaded is None or not 0 <= (now - loaded).total_seconds() < REFRESH_SECONDS:
            self._values = await self.store.load()
            self._loaded_at = now

    async def change(self, chat_id: int, name: str, value: object, *, by: int) -> None:
        await self.store.change(chat_id, name, value, by=by, at=self.clock.now())
        await self.refresh(force=True)
