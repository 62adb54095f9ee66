"""Ingest: a group backlog drained through a real `tgbot run` process.

Run: `.venv/bin/python -m bench.bench_ingest [--messages 20000] [--chats 100]
[--postgres-url URL] [--profile out.prof]`.

The fake Bot API (this process, 127.0.0.1, real HTTP) queues a backlog of group messages
(no mention of the bot, so none is answered: every one is only stored). Then `tgbot run`
starts as a subprocess against it (SQLite in a temp directory; with `--postgres-url`, that
database, whose `public` schema is dropped and rebuilt first),
polls in batches of 100 and confirms each batch only after storing it. Measured:

- start-up: from spawning the process to its first `getUpdates`;
- idle RSS: the process's resident memory once it polls and before the backlog drains
  (`VmRSS`), and its peak (`VmHWM`) at the end;
- messages/s: backlog size / time from the first `getUpdates` until the offset passes the
  last update (everything stored, in order, exactly once: checked afterwards).

`--profile` runs the process under cProfile and writes the stats file on its clean exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from adapters.llm.scripted import ScriptedModel
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from storage.engine import create_engine_for
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "424242:BENCH-ingest"


@dataclass(frozen=True, slots=True)
class IngestResult:
    messages: int
    chats: int
    startup_seconds: float
    drain_seconds: float
    idle_rss_mb: float
    peak_rss_mb: float
    stored_in_order: bool

    @property
    def per_second(self) -> float:
        return self.messages / self.drain_seconds

    def markdown(self, label: str = "SQLite") -> str:
        return (
            f"| {label} | {self.chats} groups × {self.messages // self.chats} = "
            f"{self.messages:,} | {self.startup_seconds:.2f} s | {self.drain_seconds:.2f} s "
            f"| {self.per_second:,.0f} | {self.idle_rss_mb:.0f} MB "
            f"| {self.peak_rss_mb:.0f} MB | {self.stored_in_order} |"
        )


INGEST_HEADER = (
    "| database | backlog | start-up | drain | inbound msgs/s | idle RSS | peak RSS "
    "| stored once, in order |\n|---|---|---:|---:|---:|---:|---:|---|"
)


def aiogram_floor_mb() -> float:
    """Resident memory of a fresh interpreter that imports only aiogram (its types and
    methods): the floor under `tgbot run`'s footprint."""
    code = (
        "import aiogram, aiogram.types, aiogram.methods\n"
        "print([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return int(out.strip()) / 1024


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run_ingest(
    messages: int,
    chats: int,
    data_dir: Path,
    *,
    database_url: str | None = None,
    profile: Path | None = None,
) -> IngestResult:
    async with (
        FakeBotApi(TOKEN, username="ingest_bot", first_name="Ingest") as api,
        FakeOpenAIServer() as llm,
    ):
        llm.model = ScriptedModel()
        per_chat = messages // chats
        last = 0
        for n in range(per_chat):
            for c in range(chats):
                user = {"id": 3_000 + (n + c) % 11, "first_name": f"member{(n + c) % 11}"}
                update = api.user_message(-1_000_000 - c, user, f"message {n} in {c}")
                last = api.push_update(update)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(data_dir),
            "BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE": api.base_url,
            "LLM_BASE_URL": llm.base_url,
            "LLM_API_KEY": "sk-bench",
            "DATA_DIR": str(data_dir),
            "BOT_LOCALE": "en",
            "SCHEDULE__DAILY_SUMMARY": "false",
            "TGBOT_LOG_LEVEL": "WARNING",
        }
        if database_url:
            env["DATABASE_URL"] = database_url
        command = [sys.executable]
        if profile is not None:
            command += ["-m", "cProfile", "-o", str(profile)]
        command += ["-m", "bot.app.cli", "run"]
        log = (data_dir / "bot.log").open("wb")
        spawned = time.perf_counter()
        process = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
            command, cwd=ROOT, env=env, stdout=log, stderr=log
        )
        try:
            await api.wait_for_call("getUpdates", 1, timeout=120)
            polled = time.perf_counter()
            idle_rss = _status_mb(process.pid, "VmRSS")
            while not any(int(c.get("offset") or 0) > last for c in api.calls_of("getUpdates")):
                calls = len(api.calls_of("getUpdates"))
                await api.wait_for_call("getUpdates", calls + 1, timeout=120)
            drained = time.perf_counter()
            peak_rss = _status_mb(process.pid, "VmHWM")
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 120)
        finally:
            if process.poll() is None:
                process.kill()
            log.close()
    ordered = await stored_in_order(
        database_url or f"sqlite+aiosqlite:///{data_dir / 'tgbot.sqlite3'}",
        {-1_000_000 - c: [f"message {n} in {c}" for n in range(per_chat)] for c in range(chats)},
    )
    return IngestResult(
        messages=per_chat * chats,
        chats=chats,
        startup_seconds=polled - spawned,
        drain_seconds=drained - polled,
        idle_rss_mb=idle_rss,
        peak_rss_mb=peak_rss,
        stored_in_order=ordered,
    )


async def reset_postgres(url: str) -> None:
    """Drop and rebuild the `public` schema (`tgbot run` migrates it at start)."""
    engine = create_engine_for(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    finally:
        await engine.dispose()


async def stored_in_order(url: str, expected: dict[int, list[str]]) -> bool:
    """Whether each chat's stored member messages are exactly `expected[chat]`, in order."""
    store = SqlStore(create_engine_for(url))
    try:
        for chat, texts in expected.items():
            session = await store.find_session(SessionKey(chat_id=chat))
            if session is None:
                return False
            path = await store.load_path(session.id)
            if [r.body.text for r in path if isinstance(r.body, UserRecord)] != texts:
                return False
    finally:
        await store.close()
    return True


def run(
    messages: int = 20_000,
    chats: int = 100,
    *,
    database_url: str | None = None,
    profile: Path | None = None,
) -> IngestResult:
    if database_url is not None:
        asyncio.run(reset_postgres(database_url))
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-ingest-") as tmp:
        return asyncio.run(
            run_ingest(messages, chats, Path(tmp), database_url=database_url, profile=profile)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="a group backlog through `tgbot run`")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument(
        "--postgres-url", help="a throw-away PostgreSQL database (default: SQLite in a temp dir)"
    )
    parser.add_argument("--profile", type=Path, help="cProfile stats file of the bot process")
    args = parser.parse_args()
    result = run(args.messages, args.chats, database_url=args.postgres_url, profile=args.profile)
    print(INGEST_HEADER)
    print(result.markdown("PostgreSQL" if args.postgres_url else "SQLite"))
    print(f"aiogram alone: {aiogram_floor_mb():.0f} MB resident")


if __name__ == "__main__":
    main()
