"""Running `tgbot` as a subprocess, and stored traffic for the commands to read.

Traffic goes through the real wiring (`tests.rig`: `build_app` on the SQLite file under
DATA_DIR, the scripted model offline, a recording messenger), so the commands read what a
running bot would have written.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
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
