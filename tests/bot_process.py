"""`tgbot run` as a real subprocess against the fake Bot API and a fake OpenAI server.

`BotProcess` starts `python -m bot.app.cli run` on a data directory with its settings in
the environment (only those: the test's own environment does not leak in), waits until it
polls, can be SIGKILLed at any moment and started again on the same directory, and logs to
`bot.log` there so tests can read what it wrote. `process_running` is one such process for
the length of a block; `sqlite_store` opens the bot's SQLite file from the test process, to
read what the bot stored while it runs; `reply_stored` waits until a reply is sent and
stored.

`bot_running` is the fixture the end-to-end tests start `tgbot run` with (tests/test_e2e
takes it through its conftest): `await bot_running(model, config=..., **settings)` starts
the fake servers and the process and returns them; after the test the process is stopped
and must exit 0 without having logged the bot token or the model key.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import NamedTuple, Protocol

import pytest

from bot.ports import LLMProvider
from storage.engine import create_engine_for
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.deadlines import EVENT, PROCESS_READY, REAP, deadline

ROOT = Path(__file__).resolve().parents[1]


@asynccontextmanager
async def sqlite_store(data_dir: Path) -> AsyncIterator[SqlStore]:
    """The bot's SQLite file in `data_dir`, opened from the test process (while the bot
    runs, too) and closed when the block ends."""
    store = SqlStore(create_engine_for(f"sqlite+aiosqlite:///{data_dir / 'tgbot.sqlite3'}"))
    try:
        yield store
    finally:
        await store.close()


class BotProcess:
    """One bot process at a time on `data_dir`. `settings` are environment variables every
    start passes (`LLM_API_KEY="sk-test"`, `BOT_CONFIG=...`); `start(**extra)` adds more.
    `run_as` (a user and a group; the test runs as root) starts it as that user in that
    group and no other (`setpriv`), as a service manager would; `python` is the interpreter
    (this one by default)."""

    def __init__(
        self,
        api: FakeBotApi,
        llm: FakeOpenAIServer,
        data_dir: Path,
        *,
        run_as: tuple[str, str] | None = None,
        python: str = sys.executable,
        **settings: str,
    ) -> None:
        self.run_as = run_as
        self.python = python
        self.api = api
        self.llm = llm
        self.data_dir = data_dir
        self.settings = settings
        self.log_path = data_dir / "bot.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.data_dir),
            "BOT_TOKEN": self.api.token,
            "TELEGRAM_API_BASE": self.api.base_url,
            "LLM_BASE_URL": self.llm.base_url,
            "DATA_DIR": str(self.data_dir),
            **self.settings,
            **extra,
        }

    async def start(self, *, entry: str = "bot.app.cli", **extra: str) -> None:
        """Start the process (`python -m <entry> run`, environment `extra` added) and wait
        until it polls (migrated, recovered, started)."""
        assert self.process is None or self.process.poll() is not None
        polls = len(self.api.calls_of("getUpdates"))
        user: list[str] = []
        if self.run_as is not None:
            name, group = self.run_as
            user = ["setpriv", f"--reuid={name}", f"--regid={group}", "--clear-groups", "--"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
                [*user, self.python, "-m", entry, "run"],
                cwd=ROOT,
                env=self.env(**extra),
                stdout=log,
                stderr=log,
            )
        self.starts += 1
        # the event is the first poll; checked in slices, so a process that dies on start
        # fails at once with its log rather than at the deadline
        give_up = asyncio.get_running_loop().time() + deadline(PROCESS_READY)
        while True:
            try:
                await self.api.wait_for_call("getUpdates", polls + 1, timeout=0.5)
                return
            except TimeoutError:
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"tgbot run exited with {self.process.returncode} before it polled; "
                        f"its log ends:\n{self.log_tail()}"
                    ) from None
                if asyncio.get_running_loop().time() > give_up:
                    raise AssertionError(
                        f"tgbot run did not poll in time; its log ends:\n{self.log_tail()}"
                    ) from None

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=deadline(REAP))

    async def stop(self) -> int:
        """SIGTERM and wait for the exit; a process still running after the reap deadline is
        killed (and its non-zero code returned)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.process.wait, deadline(REAP))
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.process.returncode)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        """The end of `bot.log`, for a failure message."""
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log().splitlines()[-lines:])


@asynccontextmanager
async def process_running(
    api: FakeBotApi, llm: FakeOpenAIServer, data_dir: Path, **settings: str
) -> AsyncIterator[BotProcess]:
    """A started `BotProcess`, stopped with SIGTERM however the block ends; after it,
    `await bot.stop()` gives the exit code again."""
    bot = BotProcess(api, llm, data_dir, **settings)
    try:
        await bot.start()
        yield bot
    finally:
        if bot.process is not None:
            await bot.stop()


QUIET_CONFIG = """\
[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0
"""
"""Every message answered at once: no merge window, no rate limits."""
LLM_KEY = "sk-test"


class ScriptedBot(NamedTuple):
    api: FakeBotApi
    llm: FakeOpenAIServer
    bot: BotProcess
    store: SqlStore


@asynccontextmanager
async def scripted_bot(
    tmp_path: Path, model: LLMProvider, *, config: str = QUIET_CONFIG, **settings: str
) -> AsyncIterator[ScriptedBot]:
    """`tgbot run` on `tmp_path` against the fake Bot API, with `model` behind the fake
    OpenAI server, the owner 42, `config` as its TOML file, and its store open, for a block
    (the `bot_running` fixture is this, for a test)."""
    path = tmp_path / "bot.toml"
    path.write_text(config, encoding="utf-8")
    async with (
        FakeBotApi(username="test_bot") as api,
        FakeOpenAIServer(model) as llm,
        process_running(
            api,
            llm,
            tmp_path,
            **{
                "LLM_API_KEY": LLM_KEY,
                "LLM_MODEL": "fake-model",
                "OWNER_ID": "42",
                "BOT_CONFIG": str(path),
                **settings,
            },
        ) as bot,
        _bot_store(tmp_path, settings.get("DATABASE_URL")) as store,
    ):
        yield ScriptedBot(api, llm, bot, store)


@asynccontextmanager
async def _bot_store(data_dir: Path, database_url: str | None) -> AsyncIterator[SqlStore]:
    if database_url is None:
        async with sqlite_store(data_dir) as store:
            yield store
        return
    store = SqlStore(create_engine_for(database_url))
    try:
        yield store
    finally:
        await store.close()


class StartBot(Protocol):
    async def __call__(
        self, model: LLMProvider, *, config: str = QUIET_CONFIG, **settings: str
    ) -> ScriptedBot: ...


@pytest.fixture
async def bot_running(tmp_path: Path) -> AsyncIterator[StartBot]:
    """Start `tgbot run` once in the test: `await bot_running(model)` gives the fake Bot API,
    the fake OpenAI server answering with `model`, the process (owner 42, `config` as its
    TOML file, `settings` added to or replacing the defaults) and its store (the SQLite file,
    or `DATABASE_URL`'s). After the test it is stopped (a test may stop it first) and must
    have exited 0 with neither the bot token nor the model key in its log."""
    async with AsyncExitStack() as stack:
        started: list[ScriptedBot] = []

        async def start(
            model: LLMProvider, *, config: str = QUIET_CONFIG, **settings: str
        ) -> ScriptedBot:
            assert not started, "one bot per test"
            running = await stack.enter_async_context(
                scripted_bot(tmp_path, model, config=config, **settings)
            )
            started.append(running)
            return running

        yield start
        for running in started:
            code = await running.bot.stop()
            logged = running.bot.log()
            assert code == 0, running.bot.log_tail()
            assert running.api.token not in logged
            assert LLM_KEY not in logged


async def eventually(
    check: Callable[[], Awaitable[bool]],
    timeout: float = EVENT,  # noqa: ASYNC109 (a test helper: the bound is its point)
) -> None:
    """Wait until `check()` holds. Only for state in another process, which sends no event;
    `timeout` is scaled by TGBOT_TEST_DEADLINE_SCALE."""
    give_up = asyncio.get_running_loop().time() + deadline(timeout)
    while not await check():
        if asyncio.get_running_loop().time() > give_up:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def reply_stored(api: FakeBotApi, store: SqlStore, chat_id: int, replies: int) -> None:
    """Wait until the bot has sent `replies` messages and stored the last one in `chat_id`:
    the process commits its reply record after the send the fake Bot API already saw."""
    await api.wait_for_call("sendMessage", replies, timeout=deadline(EVENT))

    async def stored() -> bool:
        sent = api.sent_messages(chat_id)
        if len(sent) < replies:
            return False
        return (
            await store.find_platform_message(chat_id, sent[replies - 1]["message_id"]) is not None
        )

    await eventually(stored)
