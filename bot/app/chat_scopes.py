"""`[triggers]` and `[chats."<id>"]` resolved into `ChatScopes` once at start-up: a topic's
table over its chat's, a chat's over the bot-wide ones, persona files read, wake-word
patterns checked (a pattern that could backtrack catastrophically is a `ConfigError`)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from bot.agent.chat_scope import ChatScope, ChatScopes, TriggerRules
from bot.config import ChatTriggerSettings, Settings, TopicSettings, TriggerSettings
from bot.errors import ConfigError
from bot.services.triggers import UnsafePattern, compile_wake_words

T = TypeVar("T")


def default_triggers(triggers: TriggerSettings) -> TriggerRules:
    return TriggerRules(
        on_mention=triggers.answer_on_mention,
        on_reply=triggers.answer_on_reply,
        on_command=triggers.answer_on_command,
        keywords=tuple(triggers.keywords),
        patterns=tuple(triggers.patterns),
        ambient=triggers.ambient,
        ambient_route=triggers.ambient_route,
        ambient_cooldown_seconds=triggers.ambient_cooldown_seconds,
        ambient_daily_max=triggers.ambient_daily_max,
        answer_bots=triggers.answer_bots,
    )


def pick(value: T | None, fallback: T) -> T:
    return fallback if value is None else value


def _over(base: TriggerRules, table: ChatTriggerSettings) -> TriggerRules:
    return TriggerRules(
        on_mention=pick(table.answer_on_mention, base.on_mention),
        on_reply=pick(table.answer_on_reply, base.on_reply),
        on_command=pick(table.answer_on_command, base.on_command),
        keywords=pick(None if table.keywords is None else tuple(table.keywords), base.keywords),
        patterns=pick(None if table.patterns is None else tuple(table.patterns), base.patterns),
        ambient=pick(table.ambient, base.ambient),
        ambient_route=pick(table.ambient_route, base.ambient_route),
        ambient_cooldown_seconds=pick(
            table.ambient_cooldown_seconds, base.ambient_cooldown_seconds
        ),
        ambient_daily_max=pick(table.ambient_daily_max, base.ambient_daily_max),
        answer_bots=pick(table.answer_bots, base.answer_bots),
    )


def _read_persona(path: Path, setting: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(setting, f"cannot read the persona file {path}: {exc.strerror}") from None


def scope_over(base: ChatScope, table: TopicSettings, setting: str) -> ChatScope:
    """`table` (a chat's or a topic's) over `base`; `setting` names it in errors."""
    persona, persona_file = base.persona, base.persona_file
    if table.persona_file is not None:
        persona = _read_persona(table.persona_file, f"{setting}.persona_file")
        persona_file = str(table.persona_file)
    return ChatScope(
        persona=persona,
        persona_file=persona_file,
        route=table.route if table.route is not None else base.route,
        timezone=table.timezone if table.timezone is not None else base.timezone,
        locale=table.locale if table.locale is not None else base.locale,
        enabled=table.enabled if table.enabled is not None else base.enabled,
        allow=frozenset(table.tools.allow) if table.tools.allow is not None else base.allow,
        deny=frozenset(table.tools.deny) if table.tools.deny is not None else base.deny,
        triggers=_over(base.triggers, table.triggers),
    )


def _check_patterns(scope: ChatScope, setting: str) -> None:
    try:
        compile_wake_words(scope.triggers.keywords, scope.triggers.patterns)
    except UnsafePattern as exc:
        raise ConfigError(f"{setting}.patterns", str(exc)) from None


def chat_scopes(settings: Settings) -> ChatScopes:
    """Every configured chat and topic resolved; raises `ConfigError` naming the table."""
    default = ChatScope(triggers=default_triggers(settings.triggers))
    _check_patterns(default, "triggers")
    chats: dict[int, ChatScope] = {}
    topics: dict[tuple[int, int], ChatScope] = {}
    for chat_id, table in settings.chats.by_id.items():
        name = f'chats."{chat_id}"'
        chat = scope_over(default, table, name)
        _check_patterns(chat, f"{name}.triggers")
        chats[chat_id] = chat
        for thread, topic_table in table.topics.items():
            topic_name = f'{name}.topics."{thread}"'
            topic = scope_over(chat, topic_table, topic_name)
            _check_patterns(topic, f"{topic_name}.triggers")
            topics[(chat_id, int(thread))] = topic
    return ChatScopes(default, chats, topics)


def chat_problems(settings: Settings, tool_names: set[str], seen: set[int] | None) -> list[str]:
    """What `tgbot doctor` says about `[chats]`, one line each: unreadable persona files,
    refused patterns, routes naming an unknown profile, unknown tools (all failures), and
    chat ids the bot has never seen (`seen`, None: not known; a warning only)."""
    problems: list[str] = []
    profiles = set(settings.providers) | {"default"}

    def route_problem(route: str | None, where: str) -> None:
        if route and ":" in route and route.partition(":")[0] not in profiles:
            problems.append(f"✘ {where}: no provider profile {route.partition(':')[0]!r}")

    def table_problems(table: TopicSettings, where: str) -> None:
        route_problem(table.route, f"{where}.route")
        route_problem(table.triggers.ambient_route, f"{where}.triggers.ambient_route")
        for key in ("allow", "deny"):
            for name in getattr(table.tools, key) or ():
                if name not in tool_names and "__" not in name:  # `<server>__<tool>`: MCP's
                    problems.append(f"✘ {where}.tools.{key}: no tool named {name!r}")

    route_problem(settings.triggers.ambient_route, "triggers.ambient_route")
    try:
        chat_scopes(settings)
    except ConfigError as exc:
        problems.append(f"✘ {exc}")
    for chat_id, table in settings.chats.by_id.items():
        where = f'chats."{chat_id}"'
        table_problems(table, where)
        for thread, topic in table.topics.items():
            table_problems(topic, f'{where}.topics."{thread}"')
        if seen is not None and chat_id not in seen:
            problems.append(f"⚠ {where}: the bot has never seen this chat (is the id right?)")
    return problems
