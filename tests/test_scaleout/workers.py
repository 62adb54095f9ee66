"""`tgbot run --webhook` worker processes for the scale-out tests (shared by every test that
starts several workers on one database).

`Worker` is one `python -m bot.app.cli run --webhook` process on a free port, started (again,
after a stop or a SIGKILL, on the same ports) until it serves; its stderr is kept for
failure messages and read by tests. `worker_env` gives a worker its settings in the
environment only, `post` sends one update to a worker as Telegram would.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from adapters.telegram.webhook import SECRET_HEADER, WEBHOOK_PATH
from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import PROCESS_READY, REAP, deadline

ROOT = Path(__file__).resolve().parents[2]
SECRET = "worker-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Worker:
    """One `python -m bot.app.cli run --webhook` process at a time; its log is kept."""

    def __init__(self, name: str, env: Mapping[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.env = dict(env)
        self.log: list[str] = []
        self.ready = asyncio.Event()
        self.process: asyncio.subprocess.Process | None = None
        self.started_at_line = 0
        """Where the log of the current start begins."""
        self._reader: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start the process and wait until it serves (migrated, recovered, listening)."""
        assert self.process is None or self.process.returncode is not None
        self.ready.clear()
        self.started_at_line = len(self.log)
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.app.cli",
            "run",
            "--webhook",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *(() if "LLM_BASE_URL" in self.env else ("--offline",)),  # the canned model, meant
            cwd=ROOT,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read(self.process))
        waiting = asyncio.create_task(self.ready.wait())
        await asyncio.wait(
            {waiting, self._reader},
            timeout=deadline(PROCESS_READY),
            return_when=asyncio.FIRST_COMPLETED,
        )
        waiting.cancel()
        if not self.ready.is_set():
            raise AssertionError(f"{self.name} did not start:\n{self.output}")

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.log.append(line)
            if "webhook registered" in line or (
                "webhook listening" in line and "WEBHOOK_URL" not in self.env
            ):
                self.ready.set()

    def this_start(self) -> list[str]:
        """The log lines of the current (or last) start."""
        return self.log[self.started_at_line :]

    @property
    def output(self) -> str:
        return f"--- {self.name}\n" + "\n".join(self.log[-60:])

    async def stop(self) -> int:
        """SIGTERM, then wait for the exit (the worker drains its turns first)."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.process.wait(), deadline(REAP))
        if self._reader is not None:
            await self._reader
        return code

    async def kill(self) -> None:
        """SIGKILL (no handler runs) if it is running, and wait for the exit."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            await self._reader


def worker_env(api: FakeBotApi, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BOT_", "LLM_", "TELEGRAM_", "WEBHOOK_", "TRIGGERS__", "DASHBOARD_"))
        and k not in {"DATABASE_URL", "DATA_DIR", "OWNER_ID"}
    }
    env.update(
        BOT_TOKEN=api.token,
        TELEGRAM_API_BASE=api.base_url,
        DATA_DIR=str(data_dir),
        BOT_LOCALE="en",
        WEBHOOK_SECRET=SECRET,
        SECURITY__USER_MESSAGES_PER_MINUTE="0",
        SECURITY__CHAT_MESSAGES_PER_MINUTE="0",
        TGBOT_LOG_LEVEL="INFO",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


async def post(http: aiohttp.ClientSession, worker: Worker | str, update: Mapping[str, Any]) -> int:
    """POST one update to a worker (or to any URL serving the webhook path)."""
    base = worker if isinstance(worker, str) else worker.url
    headers = {SECRET_HEADER: SECRET}
    async with http.post(base + WEBHOOK_PATH, json=update, headers=headers) as response:
        return response.status
