"""`tgbot chat`: the owner's private chat in the terminal, through the app `tgbot run` builds.

Each typed line becomes the private message Telegram would deliver from the owner (read by
the Telegram adapter's own parser, `adapters.telegram.terminal.typed_messages`, so `/help`,
`/usage`, `/retry` are commands as in Telegram) and goes to `App.inbound`, the entry every
polled update takes: the same window, per-turn context, tools, commands, spend limits,
ledger and model route, over the configured database (`--fresh`: a throw-away one). What
the bot would send is printed (`TerminalMessenger`), with one dim line a line: calls,
tokens, cost and time. Nothing reaches Telegram. An empty line is ignored, a line longer
than a Telegram message is split as Telegram apps split it, and `/exit`, `/quit` or the end
of input (Ctrl-D) end the chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from adapters.telegram.markdown_entities import TELEGRAM_TEXT_LIMIT
from adapters.telegram.terminal import Owner, PlatformIds, TerminalMessenger, typed_messages
from bot.agent.events import ModelCalled
from bot.app.mcp_servers import start_mcp
from bot.app.preflight import (
    check_chat_owner,
    check_data_dir,
    check_database_url,
    check_offline,
    mask_url,
)
from bot.app.topology import topology_for
from bot.app.wiring import App, build_app, open_store
from bot.clock import SystemClock
from bot.config import Settings, load_settings
from bot.domain.ids import SessionKey
from bot.ports import LLMProvider, Usage
from bot.redact import install_log_scrubbing
from bot.services.usage_render import format_cost

EXIT_WORDS = frozenset({"/exit", "/quit"})
MAX_LINE_BYTES = 1 << 20
"""A typed (or piped) line longer than this is refused whole, not read into memory."""
_CHUNK = 65_536


class LineTooLong(Exception):
    """A line over `MAX_LINE_BYTES`: dropped whole, the lines after it are read."""


class TypedLines:
    """Lines from a file descriptor (the terminal, a pipe or a file) without blocking the
    event loop or leaving a thread behind: a pipe or a terminal is awaited with
    `add_reader` (Ctrl-C stops the chat at once), a regular file is simply read."""

    def __init__(self, fd: int, *, max_bytes: int = MAX_LINE_BYTES) -> None:
        self._fd = fd
        self._max = max_bytes
        self._buffer = bytearray()
        self._skipping = False
        self._eof = False

    async def next_line(self) -> str | None:
        """The next line without its line ending; None at the end of input. Raises
        `LineTooLong` once for a line over the limit (the rest of it is skipped)."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0 or self._eof:
                line = bytes(self._buffer[:end] if end >= 0 else self._buffer)
                del self._buffer[: end + 1 if end >= 0 else len(self._buffer)]
                if self._skipping:  # the end of a line already refused
                    self._skipping = False
                    continue
                if len(line) > self._max:
                    raise self._too_long()
                if line or end >= 0:
                    return line.decode("utf-8", errors="replace").removesuffix("\r")
                return None  # the end of input
            if len(self._buffer) > self._max:  # no end in sight: keep no more of it
                self._buffer.clear()
                if not self._skipping:
                    self._skipping = True
                    raise self._too_long()
            chunk = await self._read()
            self._eof = not chunk
            self._buffer += chunk

    def _too_long(self) -> LineTooLong:
        return LineTooLong(f"(a line over {self._max:,} bytes was not sent; nothing of it is kept)")

    async def _read(self) -> bytes:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self._fd, readable)
        except (OSError, ValueError):  # a regular file: a read never waits
            return os.read(self._fd, _CHUNK)
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)
        return os.read(self._fd, _CHUNK)


class TurnMeter:
    """The model calls made since the last `line`, summed for one dim line."""

    def __init__(self, currency: str) -> None:
        self.currency = currency
        self.calls: list[ModelCalled] = []

    def on_call(self, event: ModelCalled) -> None:
        self.calls.append(event)

    def line(self, seconds: float) -> str | None:
        """`· default:gpt-x · 1 call · 1,200 in (1,024 cached) / 35 out · 0.0004 USD · 1.2 s`;
        None when no model was called (a command, a refusal)."""
        calls, self.calls = self.calls, []
        if not calls:
            return None
        routes = {f"{c.route.profile}:{c.route.model}" for c in calls}
        parts = [", ".join(sorted(routes)), f"{len(calls)} call{'s' if len(calls) > 1 else ''}"]
        if used := [c.usage for c in calls if c.usage is not None]:
            parts.append(_tokens(used))
        cost = sum(c.route.prices.cost(c.usage) for c in calls if c.usage is not None)
        if cost > 0:
            parts.append(format_cost(cost, self.currency))
        failed = sum(1 for c in calls if c.error is not None)
        if failed:
            parts.append(f"{failed} failed")
        parts.append(f"{seconds:.1f} s")
        return "· " + " · ".join(parts)


def _tokens(used: Sequence[Usage]) -> str:
    cached = sum(u.cached_tokens for u in used)
    tokens = f"{sum(u.input_tokens for u in used):,} in"
    if cached:
        tokens += f" ({cached:,} cached)"
    return f"{tokens} / {sum(u.output_tokens for u in used):,} out"


def chat_settings(settings: Settings, *, data_dir: Path | None) -> tuple[Settings, Owner]:
    """The settings the chat runs on (`data_dir`: a throw-away DATA_DIR and its SQLite
    database, for `--fresh`) and who types. Without OWNER_ID only `--fresh` may stand in."""
    # a line is answered before the next is read, so no burst ever forms: the merge window
    # (`[triggers] merge_window_seconds`) would only delay each reply
    settings = settings.model_copy(
        update={"triggers": settings.triggers.model_copy(update={"merge_window_seconds": 0.0})}
    )
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir, "database_url": None})
    owner_id = check_chat_owner(settings, fresh=data_dir is not None)
    settings = settings.model_copy(update={"owner_id": owner_id})
    return settings, Owner(id=owner_id, name="Owner", language_code=_terminal_language())


def _terminal_language() -> str | None:
    """The terminal's language (`LC_ALL`, `LANG`) as the Telegram app language an owner's
    messages would carry: what `BOT_LOCALE=auto` answers in."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "")
        code = value.split(".")[0].split("_")[0].lower()
        if code.isalpha() and len(code) in (2, 3):
            return code
    return None


def describe_model(app: App) -> str:
    """The route a turn takes unless the chat chose another (`/model`)."""
    settings, routes = app.settings, app.routes
    name = f"{routes.default_profile}:{routes.default_model}"
    profile = settings.providers.get(routes.default_profile)
    if profile is not None:
        return f"model {name} at {profile.base_url}"
    if settings.llm_base_url:
        return f"model {name} at {settings.llm_base_url}"
    return "the offline model (canned replies)"


async def chat(
    config: str | None,
    *,
    fresh: bool,
    offline: bool,
    stdin: int | None = None,
    out: TextIO | None = None,
) -> int:
    """`tgbot chat` (`stdin`, `out`: a test's pipe and stream)."""
    settings = load_settings(config)
    check_offline(settings, offline=offline)
    if not fresh:
        return await _chat(settings, data_dir=None, stdin=stdin, out=out)
    with tempfile.TemporaryDirectory(prefix="tgbot-chat-") as temporary:
        return await _chat(settings, data_dir=Path(temporary), stdin=stdin, out=out)


async def _chat(
    settings: Settings, *, data_dir: Path | None, stdin: int | None, out: TextIO | None
) -> int:
    settings, owner = chat_settings(settings, data_dir=data_dir)
    check_database_url(settings)
    check_data_dir(settings.data_dir, create=True)
    install_log_scrubbing()
    logging.basicConfig(
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    fd = stdin if stdin is not None else sys.stdin.fileno()
    out = out or sys.stdout
    ids = PlatformIds()
    clock = SystemClock()
    messenger = TerminalMessenger(
        out, chat_id=owner.id, ids=ids, now=clock.now, styled=out.isatty()
    )
    async with _chat_app(settings, messenger) as app:
        session = await app.store.find_session(SessionKey(chat_id=owner.id))
        if session is not None and session.title:
            owner = dataclasses.replace(owner, name=session.title)
        where = (
            "a throw-away database, removed at the end"
            if data_dir is not None
            else f"the database {mask_url(settings.resolved_database_url)} "
            f"(DATA_DIR={settings.data_dir})"
        )
        print(
            f"tgbot chat: you are the owner (user {owner.id}) in your private chat with the "
            f"bot; {describe_model(app)}; {where}. Nothing goes to Telegram. /help lists the "
            "commands; /exit or Ctrl-D ends the chat.",
            file=sys.stderr,
            flush=True,
        )
        await converse(app, TypedLines(fd), messenger, owner, prompt=os.isatty(fd))
    return 0


@contextlib.asynccontextmanager
async def _chat_app(
    settings: Settings, messenger: TerminalMessenger, *, offline: LLMProvider | None = None
) -> AsyncIterator[App]:
    """The app `tgbot run` builds (its MCP servers' tools too) over the terminal; what was
    opened closes in reverse order however the chat ends. Nothing runs beside the chat:
    no crash recovery, jobs or daily summary (they send to other chats; `tgbot run` does
    them), no dashboard."""
    async with AsyncExitStack() as stack:
        store = await open_store(settings)
        stack.push_async_callback(store.close)
        topology = topology_for(store)
        # on PostgreSQL the workers' lock: a turn here never overlaps one `tgbot run` takes
        chat_lock = topology.chat_lock()
        stack.push_async_callback(chat_lock.aclose)
        mcp = await start_mcp(settings)
        if mcp is not None:
            stack.push_async_callback(mcp.aclose)
        app = build_app(
            settings,
            store=store,
            messenger=messenger,
            bot_id=None,
            bot_name=settings.bot_username or "tgbot",
            extra_tools=mcp.tools if mcp is not None else (),
            offline=offline,
            chat_lock=chat_lock,
            topology=topology,
        )
        stack.push_async_callback(app.ledger.aclose)
        if app.traces is not None:
            stack.push_async_callback(app.traces.aclose)
        stack.push_async_callback(app.routes.aclose)
        stack.push_async_callback(app.runner.aclose)
        stack.push_async_callback(app.inbound.drain)
        await app.runner.truth.load_shared()
        yield app


async def converse(
    app: App,
    lines: TypedLines,
    messenger: TerminalMessenger,
    owner: Owner,
    *,
    prompt: bool = False,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Read lines until the end of input or `/exit`; each one is handed to the bot as the
    owner's message(s) and answered before the next is read."""
    meter = TurnMeter(app.settings.ledger.currency)
    app.bus.on(ModelCalled, meter.on_call)
    loop = asyncio.get_running_loop()
    while True:
        if prompt:
            messenger.prompt()
        try:
            line = await lines.next_line()
        except LineTooLong as exc:
            messenger.note(str(exc))
            continue
        if line is None:
            if prompt:  # Ctrl-D: the shell's prompt on a line of its own
                messenger.note("")
            return
        text = line.strip()
        if not text:
            continue
        if text.lower() in EXIT_WORDS:
            return
        messages = typed_messages(
            text,
            owner=owner,
            ids=messenger.ids,
            at=now(),
            bot_username=app.settings.bot_username,
            locale=app.settings.fallback_locale,
        )
        if len(messages) > 1:
            messenger.note(
                f"(sent as {len(messages)} messages, as Telegram splits a text over "
                f"{TELEGRAM_TEXT_LIMIT:,} characters)"
            )
        started = loop.time()
        await app.inbound.on_messages(messages)
        await app.inbound.drain()
        if (summary := meter.line(loop.time() - started)) is not None:
            messenger.note(summary)


__all__ = ["TypedLines", "chat", "converse"]
