"""Bot commands: /usage, /context, /model, /dashboard and /budget for the owner; /retry, /id,
/jobs, /memory and /help for everyone."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from bot.agent.routes import RouteTable
from bot.agent.runtime import CallMeter
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale
from bot.errors import TelegramError
from bot.ports import Messenger, SessionInfo
from bot.services.guard import OncePerMinute, is_owner
from bot.services.told_lines import SecretText
from bot.store_ports import SessionStore
from bot.texts import text

log = logging.getLogger("tgbot.commands")

UsageReply = Callable[[], Awaitable[tuple[str, bytes | None]]]
Retry = Callable[[SessionInfo, int], Awaitable[bool]]
"""(session, requester id) → whether the requester's own last turn is regenerated."""
MeterLookup = Callable[[int], CallMeter | None]
BudgetReply = Callable[[], Awaitable[str]]
"""`/budget`: the spend limits' report (`bot.agent.spend.SpendGuard.report`)."""
ExtraCommand = Callable[[InboundMessage, SessionInfo], Awaitable[str | None]]
"""A command another service answers: its reply (None: it replied itself)."""
DashboardLink = Callable[[], str]
"""A fresh link to the dashboard (with a short-lived signed token when one is set)."""

_ANSWERING: ContextVar[Locale | None] = ContextVar("answering_locale", default=None)
"""The locale of the command being answered (its sender's, with `BOT_LOCALE=auto`)."""

OWNER_COMMANDS = frozenset({"usage", "context", "model", "dashboard", "budget"})
PUBLIC_COMMANDS = frozenset({"retry", "help", "start", "id"})


class Commands:
    """Handles our commands; returns False for commands that are not ours."""

    def __init__(
        self,
        *,
        owner_id: int | None,
        locale: Locale,
        messenger: Messenger,
        sessions: SessionStore,
        routes: RouteTable,
        meters: MeterLookup,
        usage_reply: UsageReply,
        retry: Retry | None = None,
        dashboard_link: DashboardLink | None = None,
        budget_reply: BudgetReply | None = None,
        locale_for: Callable[[InboundMessage], Locale] | None = None,
    ) -> None:
        self.budget_reply = budget_reply
        self.locale_for = locale_for
        """The locale a reply to a message is in (`BOT_LOCALE=auto`); None: `locale`."""
        self.owner_id = owner_id
        self._locale = locale
        self.messenger = messenger
        self.routes = routes
        self.meters = meters
        self.usage_reply = usage_reply
        self.retry = retry
        self.dashboard_link = dashboard_link
        self.sessions = sessions
        """The stored chats (the groups `/id` lists in the owner's private chat), their
        routes (`/model`)."""
        self._refused = OncePerMinute()
        self.extra: dict[str, ExtraCommand] = {}
        """Commands other services add (`/jobs`, `/memory`, `/settings`, `/catchup`): name →
        its answer (the asker's locale is `self.locale` while it runs)."""

    @staticmethod
    def name_of(message: InboundMessage) -> str:
        return (message.command or "").lstrip("/").lower()

    def handles(self, message: InboundMessage) -> bool:
        """Whether the message is one of our commands (then it is not stored as a message)."""
        name = self.name_of(message)
        return name in OWNER_COMMANDS | PUBLIC_COMMANDS or name in self.extra

    @property
    def locale(self) -> Locale:
        """The locale of the command being answered, else the configured one."""
        return _ANSWERING.get() or self._locale

    async def __call__(self, message: InboundMessage, session: SessionInfo) -> bool:
        if self.locale_for is None:
            return await self._answer(message, session)
        answering = _ANSWERING.set(self.locale_for(message))
        try:
            return await self._answer(message, session)
        finally:
            _ANSWERING.reset(answering)

    async def _answer(self, message: InboundMessage, session: SessionInfo) -> bool:
        name = self.name_of(message)
        extra = self.extra.get(name)
        if extra is not None:
            reply = await extra(message, session)
            if reply is not None:
                await self._say(message, reply)
            return True
        if name not in OWNER_COMMANDS | PUBLIC_COMMANDS:
            return False
        if name in OWNER_COMMANDS and not is_owner(message.sender, self.owner_id):
            log.info("refused /%s from %s", name, message.sender.id)
            # one refusal per chat a minute: a flood of /usage gets one answer
            if self._refused(("owner_only", message.chat_id), time.monotonic()):
                await self._say(message, text(self.locale, "owner_only"))
            return True
        match name:
            case "usage":
                body, chart = await self.usage_reply()
                await self._say(message, body)
                if chart is not None:
                    await self._send_chart(message, chart)
            case "context":
                await self._say(message, self.context_text(session))
            case "model":
                await self._say(message, await self.switch_model(message, session))
            case "dashboard":
                await self.send_dashboard_link(message)
            case "budget":
                await self._say(message, await self.budget_text())
            case "id":
                await self._say(message, await self.id_text(message))
            case "retry":
                if self.retry is None or not await self.retry(session, message.sender.id):
                    await self._say(message, text(self.locale, "nothing_to_retry"))
            case _:
                await self._say(message, text(self.locale, "help"))
        return True

    async def id_text(self, message: InboundMessage) -> str:
        """The sender's user id and the chat's id; in the owner's private chat also the
        groups the bot is in (from the stored chats it was not removed from)."""
        lines = [text(self.locale, "id_ids", user_id=message.sender.id, chat_id=message.chat_id)]
        in_own_chat = message.chat_type == "private" and message.chat_id == message.sender.id
        if not (in_own_chat and is_owner(message.sender, self.owner_id)):
            return "\n".join(lines)
        titles: dict[int, str] = {}
        for session in await self.sessions.list_sessions():
            if session.scene != "group" or session.closed:
                continue
            chat_id = session.key.chat_id
            if session.key.thread_id == 0 or chat_id not in titles:
                titles[chat_id] = session.title or str(chat_id)
        if not titles:
            lines.append(text(self.locale, "id_no_groups"))
            return "\n".join(lines)
        lines.append(text(self.locale, "id_groups"))
        lines.extend(f"{chat_id}  {title}" for chat_id, title in sorted(titles.items()))
        return "\n".join(lines)

    async def send_dashboard_link(self, message: InboundMessage) -> None:
        """The link goes to the owner's private chat only: typed in a group, the group is
        told a private message was sent (a member who opened the link would read
        everything the owner can)."""
        if self.dashboard_link is None:
            await self._say(message, text(self.locale, "dashboard_unset"))
            return
        # a working login: sent, never retold (notes, requests, traces see the redacted form)
        link = SecretText(
            text(self.locale, "dashboard_link", url=self.dashboard_link()),
            told_as=text(self.locale, "dashboard_link_told"),
        )
        if message.chat_type == "private" and message.chat_id == message.sender.id:
            await self._say(message, link)
            return
        try:
            await self.messenger.send_text(message.sender.id, link)
        except TelegramError:
            log.warning("could not send the dashboard link privately", exc_info=True)
            await self._say(message, text(self.locale, "dashboard_private_failed"))
            return
        await self._say(message, text(self.locale, "dashboard_sent_privately"))

    async def budget_text(self) -> str:
        if self.budget_reply is None:
            return text(self.locale, "budget_unset")
        return await self.budget_reply()

    def context_text(self, session: SessionInfo) -> str:
        route = self.routes.resolve(session.route)
        window = str(route.context_window) if route.context_window else text(self.locale, "unknown")
        meter = self.meters(session.id)
        lines = [
            f"model: {route.profile}:{route.model}",
            f"window: {window}",
        ]
        if meter is None:
            lines.append("no model call yet in this chat")
            return "\n".join(lines)
        hit = (
            f"{meter.cached_tokens / meter.reported_input:.0%}"
            if meter.reported_input and meter.cached_tokens is not None
            else "n/a"
        )
        lines += [
            f"budget: {meter.budget} (history {meter.history_budget})",
            f"last call: estimated {meter.estimated_input} (corrected "
            f"{meter.corrected_input}), reported "
            f"{meter.reported_input if meter.reported_input is not None else 'n/a'}",
            f"turns: kept {meter.kept_turns}, dropped {meter.dropped_turns}",
            f"cache hit: {hit}",
        ]
        if meter.cache_write_tokens:
            lines.append(f"cache writes: {meter.cache_write_tokens}")
        if meter.truncated_by_provider:
            lines.append(
                "warning: the provider counted far less input than was sent; it dropped the "
                "oldest messages (Ollama: raise num_ctx)"
            )
        return "\n".join(lines)

    async def switch_model(self, message: InboundMessage, session: SessionInfo) -> str:
        argument = message.text.split(maxsplit=1)[1].strip() if " " in message.text else ""
        choices = ", ".join(self.routes.profile_names)
        if not argument:
            route = self.routes.resolve(session.route)
            window = (
                str(route.context_window) if route.context_window else text(self.locale, "unknown")
            )
            return text(
                self.locale,
                "model_current",
                route=f"{route.profile}:{route.model}",
                window=window,
                choices=choices,
            )
        name, _model = self.routes.parse(argument)
        if name not in self.routes.profile_names:
            return text(self.locale, "model_unknown", name=argument, choices=choices)
        await self.sessions.set_route(session.id, argument)
        route = self.routes.resolve(argument)
        window = str(route.context_window) if route.context_window else text(self.locale, "unknown")
        return text(
            self.locale,
            "model_switched",
            route=f"{route.profile}:{route.model}",
            window=window,
        )

    async def _say(self, message: InboundMessage, body: str) -> None:
        """Send a command's answer; a Bot API refusal is logged, never raised (the update is
        handled either way: raising would only make it be handled again)."""
        try:
            delivery = await self.messenger.send_text(
                message.chat_id, body, thread_id=message.thread_id, reply_to=message.message_id
            )
        except TelegramError as exc:
            log.warning("command reply to chat %s was not sent: %s", message.chat_id, exc)
            return
        if delivery.error is not None:
            log.warning(
                "command reply to chat %s was cut short: %s", message.chat_id, delivery.error
            )

    async def _send_chart(self, message: InboundMessage, chart: bytes) -> None:
        """The `/usage` chart; a chat where the bot may not send photos (a legal 400) keeps
        the text answer alone, as the daily summary does."""
        try:
            await self.messenger.send_photo(message.chat_id, chart, thread_id=message.thread_id)
        except TelegramError as exc:
            log.warning("usage chart to chat %s was not sent: %s", message.chat_id, exc)
