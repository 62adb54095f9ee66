"""Running `tgbot`, in this process (`tgbot_here`, fast) or as a subprocess (`tgbot`, slow: one
real-process test per command), and stored traffic for the commands to read.

Traffic goes through the real wiring (`tests.rig`: `build_app` on the SQLite file under
DATA_DIR, the scripted model offline, a recording messenger), so the commands read what a
running bot would have written.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import bot.redact
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.app.cli import main
from bot.app.wiring import App, open_store
from bot.domain.ids import SessionKey
from bot.ports import SessionInfo
from tests.deadlines import PROCESS_READY, deadline
from tests.fakes import ALICE, BOB, CHEN, RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app

ROOT = Path(__file__).resolve().parents[2]
CHAT = -100500
SECRET_TOKEN = "123456:SECRET-bot-token"
SECRET_KEY = "sk-live-do-not-print"
OWNER = 42
"""The owner of the traffic's deployment (the system prompt names the owner's id)."""


@dataclass(frozen=True, slots=True)
class Done:
    code: int
    out: str
    err: str


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a `tgbot` subprocess: DATA_DIR plus secrets it must never print."""
    return {
        **os.environ,
        "DATA_DIR": str(data_dir),
        "BOT_TOKEN": SECRET_TOKEN,
        "LLM_API_KEY": SECRET_KEY,
        "BOT_LOCALE": "en",
        "OWNER_ID": str(OWNER),
        **extra,
    }


async def tgbot(*args: str, env: dict[str, str]) -> Done:
    """`python -m bot.app.cli ARGS`; killed (and reaped) if it is still running at the
    deadline."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.app.cli",
        *args,
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), deadline(PROCESS_READY))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return Done(process.returncode, out.decode(), err.decode())


_IN_PROCESS = threading.Lock()
"""The environment and sys.stdout/sys.stderr are the process's: one in-process run at a time."""


def run_cli(*args: str, env: dict[str, str]) -> Done:
    """`main(ARGS)` in this process with exactly `env` as its environment and its stdout and
    stderr captured, as `tgbot` would see them from a shell. The environment, the logging
    set-up `tgbot run` installs, and the streams are restored afterwards. (Log records go to
    pytest's handlers here, not to stderr: the real-process tests see those.)"""
    with _IN_PROCESS, _environment(env), _logging_restored(), _umask_restored():
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse: --help, a bad argument
                code = exit_.code if isinstance(exit_.code, int) else 2
    return Done(code, out.getvalue(), err.getvalue())


async def tgbot_here(*args: str, env: dict[str, str]) -> Done:
    """`run_cli` from an async test: in a thread, as each command runs its own event loop."""
    return await asyncio.to_thread(run_cli, *args, env=env)


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _umask_restored() -> Iterator[None]:
    """`main` sets the process's umask (0077) for every command: give pytest's back."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


@contextmanager
def _logging_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    factory = logging.getLogRecordFactory()
    quiet = {name: logging.getLogger(name).level for name in bot.redact.QUIET_LOGGERS}
    installed = bot.redact._installed
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.setLogRecordFactory(factory)
        for name, was in quiet.items():
            logging.getLogger(name).setLevel(was)
        bot.redact._installed = installed


@dataclass
class Traffic:
    """An app wired on DATA_DIR's SQLite file, with a model that records its requests."""

    app: App
    model: ScriptedModel
    messenger: RecordingMessenger
    clock: SteppingClock
    data_dir: Path

    async def session(self) -> SessionInfo:
        found = await self.app.store.find_session(SessionKey(chat_id=CHAT))
        assert found is not None
        return found

    async def say(self, messages: Iterable[tuple[int, str, bool]], start: datetime) -> None:
        """(message id, text, mentions the bot) from three people, 40 s apart."""
        for n, (message_id, text, mention) in enumerate(messages):
            sender = (ALICE, BOB, CHEN)[n % 3]
            at = start + timedelta(seconds=40 * n)
            self.clock.current = at
            await self.app.inbound.on_message(
                inbound(
                    message_id=message_id, text=text, sender=sender, at=at, mentions_bot=mention
                )
            )
            await self.app.inbound.drain()


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One `tgbot demo --data-dir DIR` of the session: what it printed and the directory it
    left. Tests that change the directory work on a copy (`copy_to`)."""

    data_dir: Path
    done: Done

    def copy_to(self, target: Path) -> Path:
        shutil.copytree(self.data_dir, target)
        return target


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`tgbot demo` run once per session through the CLI, in this process: the demo's own
    test reads its output and the dashboard's tests read copies of its data."""
    data = tmp_path_factory.mktemp("demo-run") / "demo"
    done = run_cli("demo", "--data-dir", str(data), env=cli_env(data))
    assert done.code == 0, done.err
    return DemoRun(data_dir=data, done=done)


@pytest.fixture
async def traffic(tmp_path: Path) -> AsyncIterator[Traffic]:
    """12 group messages, 3 answered (one with a tool call), then one unanswered message."""
    settings = rig_settings(tmp_path, owner_id=OWNER)
    store = await open_store(settings)
    model = ScriptedModel(
        [CallTool("inspect_conversation_reference", {"reference": "m1"}), Reply("It says hi.")]
    )
    messenger = RecordingMessenger()
    now = datetime.now(UTC)
    # ten minutes ago, but never yesterday: the tests read "today" from the report
    start = max(now - timedelta(minutes=10), now.replace(hour=0, minute=0, second=0, microsecond=0))
    clock = SteppingClock(start)
    app = wire_app(settings, store=store, messenger=messenger, model=model, clock=clock)
    try:
        run = Traffic(app=app, model=model, messenger=messenger, clock=clock, data_dir=tmp_path)
        await run.say(
            [
                (
                    n,
                    f"@Helper what does m1 say? ({n})" if n % 4 == 0 else f"note number {n}",
                    n % 4 == 0,
                )
                for n in range(1, 13)
            ]
            + [(13, "one more thing, unanswered", False)],
            start,
        )
        yield run
    finally:
        await app.inbound.drain()
        await app.runner.aclose()
        await app.routes.aclose()
        await store.close()
