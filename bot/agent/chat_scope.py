"""Per-chat settings, resolved: what one chat (or forum topic) has of its own — persona, route,
time zone, locale, tools, triggers, whether the bot answers there (docs/groups.md).

`ChatScopes.of(chat_id, thread_id)` answers the resolved `ChatScope`: the topic's table over
its chat's, the chat's over the bot-wide settings, and the `/settings` changes stored in the
database over all of them (`ChatScopes.overlay`). The composition root builds the tables
once from `[chats."<id>"]`; everything else only reads them. What a request offers is its
scene's tools (`offered_in`) less what its chat denies (`ChatScopes.offered`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal
from zoneinfo import ZoneInfo

from bot.domain.ids import Locale, Scene
from bot.ports import SessionInfo
from bot.tools.base import Tool

Ambient = Literal["off", "judge"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerRules:
    """What makes a group message address the bot, and when it may speak unaddressed."""

    on_mention: bool = True
    on_reply: bool = True
    on_command: bool = True
    keywords: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    ambient: Ambient = "off"
    ambient_route: str | None = None
    ambient_cooldown_seconds: int = 600
    ambient_daily_max: int = 10
    answer_bots: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatScope:
    """One chat's (or topic's) settings as they apply. `persona` is the persona file's text,
    read once at start-up; `allow` None offers every tool not in `deny`."""

    persona: str = ""
    persona_file: str | None = None
    route: str | None = None
    timezone: str | None = None
    locale: Locale | None = None
    enabled: bool = True
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    triggers: TriggerRules = field(default_factory=TriggerRules)

    def offers(self, tool_name: str) -> bool:
        """Whether a tool of this name is offered (and may run) here."""
        if tool_name in self.deny:
            return False
        return self.allow is None or tool_name in self.allow

    @property
    def zone(self) -> ZoneInfo | None:
        return ZoneInfo(self.timezone) if self.timezone else None


DEFAULT_SCOPE = ChatScope()

Overlay = Callable[[int, ChatScope], ChatScope]
"""The `/settings` changes of a chat applied over its configured scope."""


class ChatScopes:
    """Resolved scopes by chat id and by (chat id, thread id); an unlisted chat has the
    default, an unlisted topic its chat's."""

    def __init__(
        self,
        default: ChatScope = DEFAULT_SCOPE,
        chats: Mapping[int, ChatScope] | None = None,
        topics: Mapping[tuple[int, int], ChatScope] | None = None,
    ) -> None:
        self.default = default
        self.chats = dict(chats or {})
        self.topics = dict(topics or {})
        self.overlay: Overlay | None = None
        """Set by the composition root when `/settings` changes are stored."""

    def configured(self, chat_id: int, thread_id: int = 0) -> ChatScope:
        """The scope as the TOML file gives it (no `/settings` change)."""
        if thread_id:
            topic = self.topics.get((chat_id, thread_id))
            if topic is not None:
                return topic
        return self.chats.get(chat_id, self.default)

    def of(self, chat_id: int, thread_id: int = 0) -> ChatScope:
        scope = self.configured(chat_id, thread_id)
        return self.overlay(chat_id, scope) if self.overlay is not None else scope

    def scoped(self, session: SessionInfo) -> SessionInfo:
        """`session` with its chat's route when it has none of its own (`/model` wins)."""
        if session.route:
            return session
        route = self.of(session.key.chat_id, session.key.thread_id).route
        return replace(session, route=route) if route else session

    def offered(self, tools: Mapping[str, Tool], session: SessionInfo) -> dict[str, Tool]:
        """The tools a request of `session` offers: its scene's, less what the chat denies
        (the same set for every request of the chat: it opens the cached prefix)."""
        scope = self.of(session.key.chat_id, session.key.thread_id)
        return {
            name: tool
            for name, tool in offered_in(tools, session.scene).items()
            if scope.offers(name)
        }


def offered_in(tools: Mapping[str, Tool], scene: Scene) -> dict[str, Tool]:
    """The tools a request in `scene` offers, in table order (the same for every chat of
    the scene: the tool schemas and the index open the cached prefix)."""
    return {
        name: tool for name, tool in tools.items() if tool.scenes is None or scene in tool.scenes
    }


NO_SCOPES = ChatScopes()
"""No per-chat settings: every chat has the defaults."""
