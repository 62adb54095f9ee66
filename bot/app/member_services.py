"""What members ask the bot to do, wired from the settings: each chat's settings (`/settings`
over `[chats]`), reminders and scheduled posts, kept memory facts, `/catchup` and the ambient
judge (docs/architecture.md, "Scheduled jobs", "Memory"; docs/groups.md).

`member_services` opens them over the conversation store; `build_app` (`bot.app.wiring`)
offers their tools and adds their commands (`add_chat_commands`); the inbound path takes
the chats' settings, the judge and the facts' move to a supergroup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.agent.chat_scope import ChatScopes
from bot.agent.routes import RouteTable
from bot.agent.runtime import TurnRunner
from bot.agent.spend import SpendGuard
from bot.app.chat_scopes import chat_scopes
from bot.app.jobs import jobs_policy, open_job_store
from bot.app.policies import memory_limits
from bot.config import Settings
from bot.context.memory_block import MemoryLimits
from bot.domain.facts import InboundMessage
from bot.ports import Clock, Messenger, SessionInfo
from bot.services.ambient import AmbientListener, AmbientPolicy
from bot.services.catchup import Catchup
from bot.services.chat_settings import ChatSettingsBook, ChatSettingsStore, LocalChatSettings
from bot.services.commands import Commands
from bot.services.jobs import JobBook
from bot.services.jobs_command import JobsCommand
from bot.services.memory import MemoryCommand
from bot.services.settings_command import SettingsCommand
from bot.store_ports import ConversationStore, MemoryFacts
from bot.texts import ChatLocales
from bot.tools.base import Tool
from bot.tools.forget import TOOL as FORGET_TOOL
from bot.tools.remember import TOOL as REMEMBER_TOOL
from bot.tools.rights import ChatAdmins
from bot.tools.schedule import schedule_tools
from storage.chat_settings import SqlChatSettings
from storage.memory_facts import SqlMemoryFacts
from storage.sql import SqlStore


@dataclass(frozen=True, slots=True)
class MemberServices:
    """Over one store: each chat's settings, the jobs and the memory facts (None: off)."""

    scopes: ChatScopes
    book: ChatSettingsBook
    jobs: JobBook
    memory: MemoryFacts | None
    memory_limits: MemoryLimits

    def tools(self, offered: Sequence[Tool], extra: Sequence[Tool]) -> tuple[Tool, ...]:
        """`offered`, the scheduling tools, then `extra`; `remember` and `forget` only
        where facts can be kept."""
        tools = (*offered, *schedule_tools(self.jobs), *extra)
        if self.memory is not None:
            return tools
        memory_tools = (REMEMBER_TOOL.spec.name, FORGET_TOOL.spec.name)
        return tuple(tool for tool in tools if tool.spec.name not in memory_tools)


def member_services(settings: Settings, store: ConversationStore, clock: Clock) -> MemberServices:
    scopes = chat_scopes(settings)
    return MemberServices(
        scopes=scopes,
        book=ChatSettingsBook(open_chat_settings(store), clock=clock).attach(scopes),
        jobs=JobBook(open_job_store(store), jobs_policy(settings), clock),
        memory=open_memory_facts(store),
        memory_limits=memory_limits(settings),
    )


def open_chat_settings(store: ConversationStore) -> ChatSettingsStore:
    """The `/settings` changes: a table on SQLite and PostgreSQL (every worker reads it);
    in memory for the in-memory store."""
    if isinstance(store, SqlStore):
        return SqlChatSettings(store.engine)
    return LocalChatSettings()


def open_memory_facts(store: ConversationStore) -> MemoryFacts | None:
    """The facts `remember` keeps, in the store's database; None (memory off) for a store
    without one (the in-memory store of tests)."""
    if isinstance(store, SqlStore):
        return SqlMemoryFacts(store.engine)
    return None


def add_chat_commands(
    settings: Settings,
    commands: Commands,
    members: MemberServices,
    *,
    store: ConversationStore,
    routes: RouteTable,
    runner: TurnRunner,
    outside: Messenger,
    clock: Clock,
    spend: SpendGuard | None,
    locales: ChatLocales,
) -> None:
    """The commands other services answer: `/jobs`, `/memory`, `/settings` for group admins
    (rights from Telegram) and `/catchup`."""
    admins = ChatAdmins(messenger=outside, clock=clock)
    scopes = members.scopes
    jobs = JobsCommand(members.jobs, outside)
    facts = members.memory
    memory = None if facts is None else MemoryCommand(facts, members.memory_limits)
    settings_command = SettingsCommand(
        book=members.book,
        scopes=scopes,
        admin_may=frozenset(settings.chats.admin_may),
        is_admin=admins.is_admin,
        owner_id=settings.owner_id,
        route_known=lambda route: routes.parse(route)[0] in routes.profile_names,
        locale_for=locales.for_message,
    )

    async def settings_reply(message: InboundMessage, _session: SessionInfo) -> str:
        return await settings_command(message)

    async def jobs_reply(message: InboundMessage, _session: SessionInfo) -> str:
        return await jobs(message, commands.locale)

    commands.extra["jobs"] = jobs_reply
    if memory is not None:  # memory off: `/memory` is not a command

        async def memory_reply(message: InboundMessage, _session: SessionInfo) -> str:
            return await memory.answer(message, commands.locale)

        commands.extra["memory"] = memory_reply
    commands.extra["settings"] = settings_reply
    commands.extra["catchup"] = Catchup(
        history=store,
        routes=routes,
        caller=runner.calls.caller,
        clock=clock,
        scopes=scopes,
        spent_for=spend.spent_for if spend is not None else None,
        locale_for=locales.for_message,
    )


def ambient_listener(
    settings: Settings,
    store: ConversationStore,
    routes: RouteTable,
    runner: TurnRunner,
    clock: Clock,
    spend: SpendGuard | None,
) -> AmbientListener | None:
    """The ambient judge, when any chat (or the defaults) has `ambient = "judge"`."""
    tables = [settings.triggers.ambient]
    for chat in settings.chats.by_id.values():
        tables.append(chat.triggers.ambient or "off")
        tables += [topic.triggers.ambient or "off" for topic in chat.topics.values()]
    if "judge" not in tables:
        return None
    return AmbientListener(
        history=store,
        routes=routes,
        caller=runner.calls.caller,
        clock=clock,
        policy=AmbientPolicy(
            settle_seconds=settings.triggers.ambient_settle_seconds,
            max_judge_tokens=settings.triggers.ambient_judge_max_tokens,
            zone=settings.zone,
        ),
        log_dir=settings.data_dir / "ambient",
        spent_for=spend.spent_for if spend is not None else None,
    )
