"""Load: many private chats at once through aiogram's real client and the fake Bot API.

Run: `.venv/bin/python -m bench.bench_load [--chats 200] [--messages 50] [--postgres-url URL]`
(SQLite in a temp directory, or a throw-away PostgreSQL database whose `public` schema is
dropped and rebuilt; the scripted model, every message answered). All messages are queued on
the fake Bot API first; the bot polls them with `poll_updates` (batches of 100, chats concurrently),
stores each, runs a turn, and sends the reply over HTTP. Measured until every message is
stored and every turn has ended:

- messages/s: inbound messages taken in and answered per second of wall time;
- peak memory: the process's peak RSS (the fake Bot API lives in the same process) and the
  Python heap peak seen by tracemalloc when `--trace-memory` is given (slower);
- checks: every message stored exactly once, each chat's messages in order.

Webhook workers (`--webhook-workers`): the same kind of load through real `tgbot run
--webhook --offline` processes, so one worker can be set beside two on one PostgreSQL
database: `.venv/bin/python -m bench.bench_load --webhook-workers [--chats 32] [--messages
50] [--postgres-url URL]` (else TEST_POSTGRES_URL; `scripts/with-postgres` sets it). This
process is the load balancer: every chat posts its messages one after the other, each once
the bot answered the one before (as a member who reads the answer before writing again), chats
at once, each message to the next worker in turn, so a chat's consecutive turns run on
different workers. Every message is its own turn, whatever the number of workers: the CPU
per reply of one row compares with another's (when messages were posted without waiting, a
worker merged a varying number into one turn: 291 to 676 replies for the same 1,600
messages). Measured from the first POST until every chat's last message is answered.
Rows: one worker on SQLite (always), then one and two workers on PostgreSQL; without a
PostgreSQL URL those rows are skipped and the output says so. Each row gives the workers'
CPU (user + system, every worker, `/proc`) over the run per reply sent.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from adapters.llm.scripted import ScriptedModel
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from adapters.telegram.webhook import HEALTH_PATH, SECRET_HEADER, WEBHOOK_PATH
from bench.bench_cpu import cpu_seconds
from bench.bench_ingest import reset_postgres, stored_in_order
from bot.app.heap import settle_heap
from bot.app.wiring import build_app, open_store
from bot.config import load_settings
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from testkit.fake_bot_api import FakeBotApi

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-secret"
POSTGRES_SKIPPED = (
    "PostgreSQL rows skipped: no --postgres-url given and TEST_POSTGRES_URL is unset "
    "(`scripts/with-postgres .venv/bin/python -m bench.bench_load --webhook-workers` runs them)"
)


@dataclass(frozen=True, slots=True)
class LoadResult:
    chats: int
    per_chat: int
    seconds: float
    stored_in_order: bool
    replies: int
    peak_rss_mb: float
    heap_peak_mb: float | None

    @property
    def messages(self) -> int:
        return self.chats * self.per_chat

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def markdown(self, label: str = "SQLite") -> str:
        return (
            f"| {label} | {self.chats} × {self.per_chat} = {self.messages:,} "
            f"| {self.replies:,} | {self.seconds:.1f} s | {self.per_second:,.0f} "
            f"| {self.stored_in_order} | {self.peak_rss_mb:.0f} MB |"
        )


LOAD_HEADER = (
    "| database | chats × messages | replies | wall time | answered msgs/s "
    "| stored once, in order | peak RSS |\n|---|---|---:|---:|---:|---|---:|"
)


def run(chats: int = 200, per_chat: int = 50, *, database_url: str | None = None) -> LoadResult:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-load-") as tmp:
        return asyncio.run(run_load(chats, per_chat, Path(tmp), database_url=database_url))


async def run_load(
    chats: int,
    per_chat: int,
    data_dir: Path,
    *,
    trace_memory: bool = False,
    database_url: str | None = None,
) -> LoadResult:
    if trace_memory:
        tracemalloc.start()
    async with FakeBotApi(username="load_bot") as api:
        if database_url is not None:
            await reset_postgres(database_url)
        settings = load_settings(
            data_dir=data_dir,
            database_url=database_url,
            bot_locale="en",
            triggers={"merge_window_seconds": 0},
            security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
            schedule={"daily_summary": False},
        )
        store = await open_store(settings)
        bot = build_bot(api.token, api.base_url)
        app = build_app(
            settings,
            store=store,
            messenger=TelegramMessenger(bot),
            bot_id=api.bot_id,
            bot_name="Load",
            offline=ScriptedModel(keep_requests=False),
        )
        dispatcher = build_dispatcher(
            app.inbound, bot_id=api.bot_id, bot_username=api.username, locale="en"
        )
        chat_ids = [10_000 + n for n in range(chats)]
        last = 0
        for n in range(per_chat):
            for chat in chat_ids:
                update = api.user_message(chat, chat, f"message {n}", chat_type="private")
                last = api.push_update(update)
        thresholds = gc.get_threshold()
        settle_heap()  # as `tgbot run` does before its first update
        stop = asyncio.Event()
        started = time.perf_counter()
        polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop, poll_seconds=1))
        while not any(int(c.get("offset") or 0) > last for c in api.calls_of("getUpdates")):
            await api.wait_for_call("getUpdates", len(api.calls_of("getUpdates")) + 1, 60)
        await app.inbound.drain()
        seconds = time.perf_counter() - started
        stop.set()
        await polling
        gc.unfreeze()  # the next bench in this process starts from the defaults
        gc.set_threshold(*thresholds)
        ordered = True
        for chat in chat_ids:
            session = await store.find_session(SessionKey(chat_id=chat))
            assert session is not None
            loaded = await store.load_history(session.id, max_records=per_chat * 4 + 10)
            texts = [r.body.text for r in loaded.records if isinstance(r.body, UserRecord)]
            ordered = ordered and not loaded.has_earlier
            ordered = ordered and texts == [f"message {n}" for n in range(per_chat)]
        replies = sum(len(api.sent_messages(chat)) for chat in chat_ids)
        await bot.session.close()
        await app.routes.aclose()
        await store.close()
    heap = None
    if trace_memory:
        heap = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return LoadResult(chats, per_chat, seconds, ordered, replies, rss, heap)


@dataclass(frozen=True, slots=True)
class WorkersResult:
    database: str
    workers: int
    chats: int
    per_chat: int
    seconds: float
    replies: int
    stored_in_order: bool
    peak_rss_mb: tuple[float, ...]
    """Each worker's peak resident memory (`VmHWM`)."""
    cpu_seconds: float = 0.0
    """The workers' CPU (user + system, all of them) from the first POST to the last reply."""

    @property
    def cpu_ms_per_reply(self) -> float:
        return self.cpu_seconds * 1000 / max(1, self.replies)

    @property
    def messages(self) -> int:
        return self.chats * self.per_chat

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def markdown(self) -> str:
        rss = " + ".join(f"{mb:.0f}" for mb in self.peak_rss_mb)
        return (
            f"| {self.database} | {self.workers} | {self.chats} × {self.per_chat} = "
            f"{self.messages:,} | {self.replies:,} | {self.seconds:.1f} s "
            f"| {self.per_second:,.0f} | {self.stored_in_order} | {rss} MB "
            f"| {self.cpu_ms_per_reply:.2f} ms |"
        )


WORKERS_HEADER = (
    "| database | webhook workers | chats × messages | replies | wall time | answered msgs/s "
    "| stored once, in order | peak RSS per worker | workers' CPU per reply |\n"
    "|---|---:|---|---:|---:|---:|---|---:|---:|"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _peak_rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return float("nan")
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), "VmHWM: 0 kB")
    return int(line.split()[1]) / 1024


async def run_webhook_workers(
    workers: int, chats: int, per_chat: int, data_dir: Path, *, database_url: str | None
) -> WorkersResult:
    """`workers` webhook processes on one database under the load the module docstring
    describes; SQLite (`database_url` None) takes one worker only."""
    if database_url is None and workers != 1:
        raise ValueError("SQLite is one process: one webhook worker")
    if database_url is not None:
        await reset_postgres(database_url)  # the workers migrate it, one at a time
    url = database_url or f"sqlite+aiosqlite:///{data_dir / 'w0' / 'tgbot.sqlite3'}"
    async with FakeBotApi(username="load_bot") as api, aiohttp.ClientSession() as http:
        ports = [_free_port() for _ in range(workers)]
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for n, port in enumerate(ports):
                processes.append(_spawn_worker(api, data_dir / f"w{n}", port, database_url))
            await asyncio.gather(
                *(_serving(http, port, p) for port, p in zip(ports, processes, strict=True))
            )
            chat_ids = [20_000 + n for n in range(chats)]
            updates = {
                chat: [
                    api.user_message(chat, chat, f"message {n}", chat_type="private")
                    for n in range(per_chat)
                ]
                for chat in chat_ids
            }
            update_ids = itertools.count(1)
            turn = itertools.cycle(ports)  # the load balancer: round robin over the workers
            started = time.perf_counter()
            cpu_at_start = sum(cpu_seconds(p.pid) for p in processes)

            async def chat_traffic(chat: int) -> None:
                for update in updates[chat]:
                    body = {"update_id": next(update_ids), **update}
                    target = f"http://127.0.0.1:{next(turn)}{WEBHOOK_PATH}"
                    answered = len(api.sent_messages(chat))
                    async with http.post(target, json=body, headers={SECRET_HEADER: SECRET}) as r:
                        if r.status != 200:
                            raise RuntimeError(f"a worker answered {r.status}")
                    # the member reads the answer before writing again: one turn per message
                    await api.wait_for_sent(chat, answered + 1, timeout=120)

            await asyncio.gather(*(chat_traffic(chat) for chat in chat_ids))
            seconds = time.perf_counter() - started
            cpu = sum(cpu_seconds(p.pid) for p in processes) - cpu_at_start
            peaks = tuple(_peak_rss_mb(p.pid) for p in processes)
            replies = sum(len(api.sent_messages(chat)) for chat in chat_ids)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    await asyncio.to_thread(process.wait, 60)
                except subprocess.TimeoutExpired:
                    process.kill()
    ordered = await stored_in_order(
        url, {chat: [f"message {n}" for n in range(per_chat)] for chat in chat_ids}
    )
    return WorkersResult(
        database="PostgreSQL" if database_url else "SQLite",
        workers=workers,
        chats=chats,
        per_chat=per_chat,
        seconds=seconds,
        replies=replies,
        stored_in_order=ordered,
        peak_rss_mb=peaks,
        cpu_seconds=cpu,
    )


def _spawn_worker(
    api: FakeBotApi, data_dir: Path, port: int, database_url: str | None
) -> subprocess.Popen[bytes]:
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
        "BOT_TOKEN": api.token,
        "TELEGRAM_API_BASE": api.base_url,
        "DATA_DIR": str(data_dir),
        "BOT_LOCALE": "en",
        "WEBHOOK_SECRET": SECRET,
        "TRIGGERS__MERGE_WINDOW_SECONDS": "0",
        "SECURITY__USER_MESSAGES_PER_MINUTE": "0",
        "SECURITY__CHAT_MESSAGES_PER_MINUTE": "0",
        "SCHEDULE__DAILY_SUMMARY": "false",
        "TGBOT_LOG_LEVEL": "WARNING",
        **({"DATABASE_URL": database_url} if database_url else {}),
    }
    command = [sys.executable, "-m", "bot.app.cli", "run", "--webhook", "--offline"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with (data_dir / "bot.log").open("ab") as log:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)


async def _serving(
    http: aiohttp.ClientSession, port: int, process: subprocess.Popen[bytes]
) -> None:
    """Wait until the worker answers its health check (migrated, recovered, listening)."""
    give_up = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"a webhook worker exited with {process.returncode} at start")
        try:
            async with http.get(f"http://127.0.0.1:{port}{HEALTH_PATH}") as answer:
                if answer.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > give_up:
            raise RuntimeError("a webhook worker did not start in 120 s")
        await asyncio.sleep(0.2)


def compare_workers(
    chats: int = 32, per_chat: int = 50, *, database_url: str | None
) -> tuple[list[WorkersResult], str | None]:
    """One worker on SQLite, then one and two on PostgreSQL (or the reason they were not run)."""
    rows: list[WorkersResult] = []
    runs = [(1, None)] + ([(1, database_url), (2, database_url)] if database_url else [])
    for workers, url in runs:
        with tempfile.TemporaryDirectory(prefix="tgbot-bench-workers-") as tmp:
            rows.append(
                asyncio.run(
                    run_webhook_workers(workers, chats, per_chat, Path(tmp), database_url=url)
                )
            )
    return rows, None if database_url else POSTGRES_SKIPPED


def main() -> None:
    parser = argparse.ArgumentParser(description="many chats at once through the fake Bot API")
    parser.add_argument("--chats", type=int)
    parser.add_argument("--messages", type=int, help="messages per chat")
    parser.add_argument("--trace-memory", action="store_true")
    parser.add_argument(
        "--postgres-url",
        help="a throw-away PostgreSQL database (--webhook-workers: else TEST_POSTGRES_URL)",
    )
    parser.add_argument(
        "--webhook-workers",
        action="store_true",
        help="tgbot run --webhook processes: one on SQLite, one and two on PostgreSQL",
    )
    args = parser.parse_args()
    if args.webhook_workers:
        url = args.postgres_url or os.environ.get("TEST_POSTGRES_URL")
        rows, skipped = compare_workers(args.chats or 32, args.messages or 50, database_url=url)
        print(WORKERS_HEADER)
        for row in rows:
            print(row.markdown())
        if skipped:
            print(skipped)
        return
    args.chats = args.chats or 200
    args.messages = args.messages or 50
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(
            run_load(
                args.chats,
                args.messages,
                Path(tmp),
                trace_memory=args.trace_memory,
                database_url=args.postgres_url,
            )
        )
    print(f"{result.chats} chats x {result.per_chat} messages = {result.messages} messages")
    print(f"  {result.seconds:.1f} s, {result.per_second:.0f} messages/s, {result.replies} replies")
    print(f"  every message stored once, in order per chat: {result.stored_in_order}")
    heap = f", Python heap peak {result.heap_peak_mb:.0f} MB" if result.heap_peak_mb else ""
    print(f"  peak RSS {result.peak_rss_mb:.0f} MB{heap}")


if __name__ == "__main__":
    main()
